-- `trainer encode MODEL_DIR FILE [--adapter DIR]`: one sentence a line in, its embedding out as one JSON
-- array of floats a line (the folder's pooling and normalisation, as sentence-transformers).
-- --adapter applies a PEFT LoRA adapter (ours or peft's) to MODEL_DIR without merging it.
local usage = "trainer encode MODEL_DIR FILE [--adapter DIR] [--batch N] [--max-length N] [--device D]   sentence embeddings, JSON a line"

return {
  usage = usage,
  run = function(args)
    local cl = require("trainer.cli.model_args")
    local tk = require("trainer.core.tokenizer")
    local flags, lines, model, tok = cl.load_for("encode", "embedding", args, usage)
    local bs = cl.int(flags, "batch", 32)
    -- Like sentence-transformers: within a window, encode texts sorted by length so a batch
    -- pads little, then write the embeddings back in input order.
    local window = math.max(bs, 2048)
    for wfirst = 1, #lines, window do
      local wlast = math.min(wfirst + window - 1, #lines)
      local order = {}
      for i = wfirst, wlast do order[#order + 1] = i end
      table.sort(order, function(a, b)
        if #lines[a] ~= #lines[b] then return #lines[a] > #lines[b] end
        return a < b
      end)
      local out = {}
      for first = 1, #order, bs do
        local chunk, idx = {}, {}
        for j = first, math.min(first + bs - 1, #order) do
          chunk[#chunk + 1] = lines[order[j]]
          idx[#idx + 1] = order[j]
        end
        local b = tok:batch(chunk, { max_length = model.max_length, device = flags.device })
        local e = model:forward(b)
        tk.free_batch(b)
        local C = e:shape()[2]
        local v = e:values()
        e:free()
        for r = 0, #chunk - 1 do
          local row = {}
          for c = 1, C do row[c] = v[r * C + c] end
          out[idx[r + 1]] = cl.float_array(row)
        end
      end
      for i = wfirst, wlast do io.write(out[i], "\n") end
    end
    tok:free()
    model:free()
    return 0
  end,
}
