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
