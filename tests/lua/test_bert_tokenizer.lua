-- trainer.tokenizer (the Lua layer over core/tokenizer/tokenizer.h): single texts and pairs with
-- type ids, batches as i32 tensors padded to the longest with the attention mask,
-- truncation, the ids of the tiny golden, and errors that name the folder.
local tk = require("trainer.core.tokenizer")
local st = require("trainer.core.safetensors")
local errors = require("trainer.core.errors")
local root = require("trainer.native").root()
local dir = root .. "/tests/data/tiny_bert"

return {
  { "encode_text_and_pair", function()
    local tok = tk.load(dir)
    local ids = tok:encode("The cat sat on the mat.")
    assert(table.concat(ids, ",") == "2,39,40,42,43,39,44,5,3", table.concat(ids, ","))
    local pids, types = tok:encode("the cat", "a dog")
    assert(table.concat(pids, ",") == "2,39,40,3,13,41,3", table.concat(pids, ","))
    assert(table.concat(types, ",") == "0,0,0,0,1,1,1", table.concat(types, ","))
    local bare = tok:encode("the cat", nil, { add_special_tokens = false })
    assert(table.concat(bare, ",") == "39,40")
    assert(tok:id_to_token(2) == "[CLS]" and tok:token_to_id("[SEP]") == 3 and tok:pad_id() == 0)
    tok:free()
  end },
  { "batch_matches_the_golden", function()
    local tok = tk.load(dir)
    local texts = {}
    for line in io.lines(root .. "/tests/data/golden_tiny_bert_texts.txt") do texts[#texts + 1] = line end
    local b = tok:batch(texts)
    local g = st.load(root .. "/tests/data/golden_tiny_bert.safetensors")
    for _, name in ipairs({ "input_ids", "attention_mask", "token_type_ids" }) do
      local ref = g:tensor(name)
      assert(b[name]:dtype() == "i32", name .. " is i32")
      assert(table.concat(b[name]:shape(), "x") == table.concat(ref:shape(), "x"), name .. " shape")
      assert(table.concat(b[name]:values(), ",") == table.concat(ref:values(), ","), name .. " values")
      ref:free()
    end
    g:close()
    tk.free_batch(b)
    local p = tok:batch({ { "the cat", "a dog sat" }, { "x", "y" } }, { max_length = 6 })
    assert(table.concat(p.input_ids:shape(), "x") == "2x6")
    assert(table.concat(p.token_type_ids:tolist()[1], ",") == "0,0,0,1,1,1")
    tk.free_batch(p)
    tok:free()
  end },
  { "by_length_orders_by_tokens_and_batches_like_batch", function()
    local tok = tk.load(dir)
    -- "xylophone" is shorter in characters than "cat sat on the mat" but longer in tokens
    -- (11 against 7 in this vocabulary); texts 6 and 7 tie at 6 tokens
    local texts = { "the cat", "cat sat on the mat", "", "xylophone", "dog", "the the the the", "a b c d" }
    local s = tok:by_length(texts, { max_length = 12 })
    assert(s.n == #texts)
    local lens = {}
    for i, t in ipairs(texts) do lens[i] = #tok:encode(t) end
    for k = 2, s.n do
      local a, b = s.order[k - 1], s.order[k]
      assert(lens[a] > lens[b] or (lens[a] == lens[b] and a < b),
        ("order %d: text %d (%d tokens) before text %d (%d tokens)"):format(k, a, lens[a], b, lens[b]))
    end
    assert(table.concat(s.order, ",") == "4,2,6,7,1,5,3", table.concat(s.order, ","))
    -- every slice equals tok:batch of the same texts (ids, mask, types; padded to its longest)
    for _, range in ipairs({ { 1, 2 }, { 2, 5 }, { 1, s.n }, { s.n, s.n } }) do
      local sub = {}
      for k = range[1], range[2] do sub[#sub + 1] = texts[s.order[k]] end
      local got, want = s:batch(range[1], range[2]), tok:batch(sub, { max_length = 12 })
      for _, name in ipairs({ "input_ids", "attention_mask", "token_type_ids" }) do
        assert(table.concat(got[name]:shape(), "x") == table.concat(want[name]:shape(), "x"), name .. " shape")
        assert(table.concat(got[name]:values(), ",") == table.concat(want[name]:values(), ","),
          ("%s of %d..%d"):format(name, range[1], range[2]))
      end
      tk.free_batch(got); tk.free_batch(want)
    end
    s:free()
    s:free()   -- twice is harmless
    local ok, err = pcall(s.batch, s, 1, 1)
    assert(not ok and errors.message(err):find("freed", 1, true), tostring(err))
    tok:free()
  end },
  { "errors_name_the_folder", function()
    local ok, err = pcall(tk.load, root .. "/tests")
    assert(not ok and errors.message(err):find(root .. "/tests", 1, true), errors.message(err))
    local tok = tk.load(dir)
    ok, err = pcall(tok.encode, tok, "bad \255 utf8")
    assert(not ok and errors.is_user_error(err), tostring(err))
    ok, err = pcall(tok.batch, tok, {})
    assert(not ok and errors.is_user_error(err))
    tok:free()
    ok, err = pcall(tok.encode, tok, "x")
    assert(not ok and errors.message(err):find("freed", 1, true))
  end },
}
