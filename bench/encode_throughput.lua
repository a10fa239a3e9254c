-- bench/encode_throughput.lua — tokenizer and encoder throughput in-process (load time
-- excluded), for bench/hf_compare.sh:  ./trainer run bench/encode_throughput.lua MODEL TEXTS [BATCH]
-- Prints "tokenize_per_s encode_per_s" and writes nothing else.
local model_dir, path, batch = arg[1], arg[2], tonumber(arg[3] or "32")
local texts = {}
for line in io.lines(path) do texts[#texts + 1] = line end
local tk = require("trainer.core.tokenizer")
local tok = tk.load(model_dir)
local model = trainer.load_model(model_dir, { task = "embedding" })
local wall = require("trainer.train.run").now -- the monotonic clock

local t0 = wall()
for _, s in ipairs(texts) do tok:encode(s) end
local t1 = wall()
-- the warm-up bench/st_compare.py gives sentence-transformers: one batch of the first texts,
-- untimed (here it packs the frozen weights for oneDNN and makes the first primitives)
local warm = {}
for i = 1, math.min(batch, #texts) do warm[i] = texts[i] end
local wb = tok:batch(warm, { max_length = model.max_length })
model:forward(wb):free()
tk.free_batch(wb)
-- timed: what `trainer encode` runs (tokenize all, batches ordered by token count)
local t2 = wall()
local sorted = tok:by_length(texts, { max_length = model.max_length })
for first = 1, sorted.n, batch do
  local b = sorted:batch(first, math.min(first + batch - 1, sorted.n))
  local e = model:forward(b)
  tk.free_batch(b)
  e:free()
end
sorted:free()
local t3 = wall()
io.write(("%.0f %.0f\n"):format(#texts / (t1 - t0), #texts / (t3 - t2)))
tok:free()
model:free()
return 0
