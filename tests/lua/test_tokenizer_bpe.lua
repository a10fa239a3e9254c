-- test_tokenizer_bpe.lua — trainer.core.tokenizer.load on byte-level BPE folders (RoBERTa's
-- and ModernBERT's layouts, tests/ref/make_bpe_golden.py): tok:encode gives the golden ids
-- and type ids of Hugging Face `tokenizers`, and tok:batch gives its padded batches (the
-- folder's pad id, masks, truncation).
local root = require("trainer.native").root()
local json = require("trainer.core.json")
local tokenizer = require("trainer.core.tokenizer")

local function golden_lines(name)
  local lines = {}
  local f = assert(io.open(root .. "/tests/data/tokenizer_golden_" .. name .. ".jsonl"))
  for line in f:lines() do lines[#lines + 1] = json.decode(line) end
  f:close()
  return lines
end

local function same(a, b, what)
  assert(#a == #b, ("%s: %d ids, golden %d"):format(what, #a, #b))
  for i = 1, #b do
    assert(a[i] == b[i], ("%s: id %d is %s, golden %s"):format(what, i, tostring(a[i]), tostring(b[i])))
  end
end

-- Every golden encode and batch of one folder through the Lua API.
local function check_folder(name)
  local tok = tokenizer.load(root .. "/tests/data/tok_" .. name)
  local singles, batches = 0, 0
  for n, g in ipairs(golden_lines(name)) do
    local what = ("%s line %d"):format(name, n)
    if g.batch then
      local texts, pairs = {}, g.pairs ~= json.null and g.pairs or {}
      for i, t in ipairs(g.batch) do
        local p = pairs[i]
        texts[i] = (p and p ~= json.null) and { t, p } or t
      end
      local b = tok:batch(texts, { max_length = g.max_length > 0 and g.max_length or nil })
      local ids, mask, types = b.input_ids:tolist(), b.attention_mask:tolist(), b.token_type_ids:tolist()
      for i = 1, #texts do
        same(ids[i], g.ids[i], what .. " ids row " .. i)
        same(mask[i], g.attention_mask[i], what .. " mask row " .. i)
        same(types[i], g.type_ids[i], what .. " type ids row " .. i)
      end
      tokenizer.free_batch(b)
      batches = batches + 1
    else
      local pair = g.pair ~= json.null and g.pair or nil
      local ids, types = tok:encode(g.text, pair, {
        add_special_tokens = g.add_special_tokens,
        max_length = g.max_length > 0 and g.max_length or nil,
      })
      same(ids, g.ids, what)
      same(types, g.type_ids, what .. " type ids")
      singles = singles + 1
    end
  end
  tok:free()
  assert(singles > 60 and batches >= 2, ("%s: %d encodes, %d batches"):format(name, singles, batches))
end

return {
  { "roberta_golden", function() check_folder("roberta") end },
  { "modernbert_golden", function() check_folder("modernbert") end },
  { "roberta_specials", function()
      local tok = tokenizer.load(root .. "/tests/data/tok_roberta")
      assert(tok:pad_id() == 1 and tok:model_max_length() == 512, "pad " .. tok:pad_id())
      assert(tok:id_to_token(0) == "<s>" and tok:token_to_id("</s>") == 2)
      local ids = tok:encode("a <mask>")
      assert(ids[1] == 0 and ids[#ids] == 2 and ids[#ids - 1] == tok:token_to_id("<mask>"),
        "<s> ... <mask> </s>: " .. table.concat(ids, ","))
      tok:free()
    end },
}
