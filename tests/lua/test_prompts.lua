-- Prompts (trainer.models.prompts) against sentence-transformers (tests/data/prompts_golden.json,
-- written by tests/ref/make_prompts_golden.py): tiny_bert with the golden's prompts and
-- include_prompt true and false; the prompt lengths ST counts, the embeddings of
-- encode(prompt_name=), encode(prompt=), the default prompt and no prompt; `encode`'s batching
-- by length and tok:batch give the same.
local json = require("trainer.core.json")
local errors = require("trainer.core.errors")
local native = require("trainer.native")
local sys = require("trainer.core.sys")
local prompts = require("trainer.models.prompts")
local tk = require("trainer.core.tokenizer")
local lib = dofile(native.root() .. "/tests/lua/testlib.lua")

local data = native.root() .. "/tests/data"
local golden = json.read(data .. "/prompts_golden.json")

-- A copy of tiny_bert with the golden's prompts and its pooling config (include or exclude).
local function folder(which)
  local dir = lib.tmpdir()
  assert(sys.mkdir_p(dir .. "/1_Pooling"))
  for _, f in ipairs({ "config.json", "model.safetensors", "modules.json", "sentence_bert_config.json",
      "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt" }) do
    lib.write(dir .. "/" .. f, lib.read(data .. "/tiny_bert/" .. f))
  end
  lib.write(dir .. "/config_sentence_transformers.json",
    json.encode({ prompts = golden.prompts, default_prompt_name = golden.default_prompt_name }))
  lib.write(dir .. "/1_Pooling/config.json", json.encode(golden.pooling[which]))
  return dir
end

local function close(ours, theirs, what)
  assert(#ours == #theirs, what .. ": row count")
  for i = 1, #theirs do
    for j = 1, #theirs[i] do
      local d = math.abs(ours[i][j] - theirs[i][j])
      assert(d <= 2e-5, ("%s: row %d col %d: %.9g vs sentence-transformers %.9g"):format(what, i, j, ours[i][j], theirs[i][j]))
    end
  end
end

local function rows_of(e)
  local B, C = e:shape()[1], e:shape()[2]
  local v, out = e:values(), {}
  for r = 0, B - 1 do
    out[r + 1] = {}
    for c = 1, C do out[r + 1][c] = v[r * C + c] end
  end
  return out
end

-- The embeddings of the golden's texts with the prompt of `case`, through tok:batch and
-- through tok:by_length (what `trainer encode` runs).
local function embed(m, tok, case)
  local prompt = prompts.resolve(m, case.prompt_name, case.prompt)
  local pl = prompts.pool_length(m, tok, prompt)
  local texts = {}
  for i, t in ipairs(golden.texts) do texts[i] = prompt and (prompt .. t) or t end
  local b = tok:batch(texts, { max_length = 64, prompt_length = pl })
  local direct = rows_of(m:forward(b))
  tk.free_batch(b)
  local s = tok:by_length(texts, { max_length = 64, prompt_length = pl })
  local sorted = {}
  for first = 1, s.n, 4 do
    local last = math.min(first + 3, s.n)
    local sb = s:batch(first, last)
    local r = rows_of(m:forward(sb))
    tk.free_batch(sb)
    for k = first, last do sorted[s.order[k]] = r[k - first + 1] end
  end
  s:free()
  return direct, sorted
end

return {
  { "prompt lengths are sentence-transformers'", function()
    local tok = tk.load(data .. "/tiny_bert")
    for p, n in pairs(golden.prompt_length) do
      assert(prompts.length(tok, p) == n, ("%q: %d vs sentence-transformers %d"):format(p, prompts.length(tok, p), n))
    end
    tok:free()
  end },
  { "prompted embeddings equal sentence-transformers' encode(prompt_name=, prompt=)", function()
    local n = 0
    for _, which in ipairs({ "include", "exclude" }) do
      local dir = folder(which)
      local m = trainer.load_model(dir, { on_warning = function() end })
      assert(m.include_prompt == (which == "include"))
      assert(m.default_prompt_name == golden.default_prompt_name and m.prompts.doc == golden.prompts.doc)
      local tok = tk.load(dir)
      for _, case in ipairs(golden.cases) do
        if case.include_prompt == (which == "include") then
          local what = ("%s, prompt_name %s, prompt %s"):format(which, tostring(case.prompt_name), tostring(case.prompt))
          local direct, sorted = embed(m, tok, case)
          close(direct, case.embeddings, what)
          close(sorted, case.embeddings, what .. " (by length)")
          n = n + 1
        end
      end
      tok:free()
      m:free()
      sys.remove_tree(dir)
    end
    assert(n == #golden.cases)
  end },
  { "the IR evaluator's query_prompt_name / corpus_prompt_name equal sentence-transformers'", function()
    local dir = folder("exclude")
    local m = trainer.load_model(dir, { on_warning = function() end })
    local tok = tk.load(dir)
    -- the embed function a run gives the evaluators: the prompt's tokens left out of the pooling
    local function embed_excluding(texts, eopts)
      local pl = eopts and prompts.pool_length(m, tok, eopts.prompt) or 0
      local b = tok:batch(texts, { max_length = 64, prompt_length = pl })
      local out = m:forward(b)
      tk.free_batch(b)
      return out
    end
    local spec = { type = "ir", folder = data .. "/ir_tiny", query_prompt_name = "query", corpus_prompt_name = "doc" }
    local set = { name = "tiny", spec = spec, type = "ir" }
    set.queries, set.corpus, set.relevant = require("trainer.train.beir").load(spec, "eval.sets.tiny")
    local scores = require("trainer.train.eval_sets").run({ set }, embed_excluding, nil, { batch_size = 8, model = m })
    local n = 0
    for k, v in pairs(golden.ir) do
      local mine = scores[k]
      assert(mine and math.abs(mine - v) <= 1e-9, ("%s: %s vs sentence-transformers %.12g"):format(k, tostring(mine), v))
      n = n + 1
    end
    assert(n > 10)
    tok:free()
    m:free()
    sys.remove_tree(dir)
  end },
  { "an unknown prompt name is a user error naming the model's prompts", function()
    local m = { prompts = { query = "q: ", doc = "d: " } }
    local ok, e = pcall(prompts.resolve, m, "passage")
    assert(not ok and errors.is_user_error(e))
    assert(errors.message(e):find('prompt "passage": the model has no prompt of that name (its prompts: doc, query)', 1, true),
      errors.message(e))
    assert(prompts.resolve(m, "document") == nil)   -- ST's own default names are empty prompts
    assert(prompts.resolve(m, nil, "x: ") == "x: ")
  end },
}
