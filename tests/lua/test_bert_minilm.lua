-- all-MiniLM-L6-v2 against sentence-transformers / PyTorch (tests/data/golden_minilm.*):
-- normalised embeddings (cosine >= 0.99999, max abs error <= 1e-4) and, for every
-- parameter, the gradient of loss = sum(embedding * loss_weight): L2 norm within 1e-3
-- relative and the first elements (grad_slice) close; the word-embedding rows of the ids
-- used. Prints "SKIP name: reason" when models/all-MiniLM-L6-v2 is absent (make fetch-models).
local ops = require("trainer.core.ops")
local st = require("trainer.core.safetensors")
local memory = require("trainer.core.memory")
local native = require("trainer.native")

local root = native.root()
local lib = dofile(root .. "/tests/lua/testlib.lua")
local dir = root .. "/models/all-MiniLM-L6-v2"

local function present() return lib.model_present(dir, "test_bert_minilm") end

return {
  { "minilm_embeddings_and_every_gradient", function()
    if not present() then return end
    local m = trainer.load_model(dir, { on_warning = function(w) error("unexpected warning: " .. w) end })
    assert(m.normalize and m.pooling.mode == "mean", "Pooling mean + Normalize from modules.json")
    local g = st.load(root .. "/tests/data/golden_minilm.safetensors")
    local e, x, a0 = lib.golden_forward(m, g)
    local ref = g:tensor("embedding")
    local ev, rv = e:values(), ref:values()
    local B, C = 8, 384
    local max_abs = 0
    for b = 0, B - 1 do
      local dot, na, nb = 0, 0, 0
      for c = 1, C do
        local i = b * C + c
        dot = dot + ev[i] * rv[i]; na = na + ev[i] ^ 2; nb = nb + rv[i] ^ 2
        max_abs = math.max(max_abs, math.abs(ev[i] - rv[i]))
      end
      local cos = dot / math.sqrt(na * nb)
      assert(cos >= 0.99999, ("text %d: cosine %.9f < 0.99999"):format(b + 1, cos))
    end
    assert(max_abs <= 1e-4, ("embedding max abs error %g > 1e-4"):format(max_abs))
    local w = g:tensor("loss_weight", { tag = "activations" })
    m:backward(w)
    e:free(); ref:free(); w:free()
    assert(memory.stats().by_tag.activations == a0, "activations left after backward")
    local n = 0
    for name, p in m:parameters() do
      n = n + 1
      local gn = g:tensor("grad_norm." .. name)
      local want = gn:item()
      gn:free()
      local got = p.grad and ops.global_norm({ p.grad }) or 0
      if name:match("^pooler") then
        assert(want == 0 and (p.grad == nil or got == 0), name .. ": the pooler is not reached")
      elseif name:match("attention%.self%.key%.bias$") then
        assert(got <= 1e-4 and want <= 1e-4, ("%s: norm %g vs %g (zero in exact arithmetic)"):format(name, got, want))
      else
        assert(math.abs(got - want) <= 1e-3 * want, ("%s: grad norm %.9g vs %.9g"):format(name, got, want))
        local sl = g:tensor("grad_slice." .. name)
        local s = sl:values()
        sl:free()
        local flat = p.grad:reshape({ p.grad:numel() })
        local head = flat:narrow(0, #s)
        local v = head:values()
        flat:free(); head:free()
        for i = 1, #s do
          assert(math.abs(v[i] - s[i]) <= 1e-3 * want + 1e-7,
            ("%s[%d]: %.9g vs %.9g"):format(name, i - 1, v[i], s[i]))
        end
      end
    end
    assert(n == 103, "103 parameters, got " .. n)
    -- word-embedding rows of every id used (first 64 columns)
    local ids_t = g:tensor("grad_rows_ids.embeddings.word_embeddings.weight")
    local rows_t = g:tensor("grad_rows.embeddings.word_embeddings.weight")
    local ids, rows = ids_t:values(), rows_t:values()
    ids_t:free(); rows_t:free()
    local wg = m:parameter_map()["embeddings.word_embeddings.weight"]
    local scale = ops.global_norm({ wg.grad })
    for r, id in ipairs(ids) do
      local row = wg.grad:narrow(id, 1)
      local gv = row:values()
      row:free()
      for c = 1, 64 do
        local got, want = gv[c], rows[(r - 1) * 64 + c]
        assert(math.abs(got - want) <= 1e-3 * scale + 1e-7, ("word row %d col %d: %g vs %g"):format(id, c - 1, got, want))
      end
    end
    for _, t in pairs(x) do t:free() end
    g:close()
    m:free()
  end },
}
