-- test_tokenizer.lua — core/tokenizer/tokenizer.h through the LuaJIT FFI: the header is valid
-- ffi.cdef input once '#' lines are dropped, and encoding from Lua gives the same ids
-- as the C tests' golden files (all-MiniLM-L6-v2).
local ffi = require("ffi")
local root = require("trainer.native").root()

local function cdef_header(name)
  local f = assert(io.open(root .. "/core/" .. name))
  local text = f:read("*a"):gsub("\n#[^\n]*", "\n"):gsub("^#[^\n]*", "")
  f:close()
  ffi.cdef(text)
end

-- another module (trainer.core.ffi) may have declared these already
if not pcall(ffi.typeof, "tr_tok_options") then
  if not pcall(ffi.typeof, "tr_error") then cdef_header("tr_base.h") end
  cdef_header("tokenizer.h")
end

local C = ffi.C

local function load(dir)
  local out = ffi.new("tr_tokenizer *[1]")
  local err = ffi.new("tr_error")
  local rc = C.tr_tok_load(out, root .. "/" .. dir, err)
  assert(rc == 0, ffi.string(err.msg))
  return ffi.gc(out[0], C.tr_tok_free)
end

return {
  { "encode_pair", function()
      local tok = load("tests/data/tok_minilm")
      local enc = ffi.new("tr_tok_encoding")
      local err = ffi.new("tr_error")
      local opt = ffi.new("tr_tok_options", { 1, 0, 0 })
      assert(C.tr_tok_encode(tok, "A man is playing a flute.", "A man is playing a large flute.",
                             opt, enc, err) == 0, ffi.string(err.msg))
      local want = { 101, 1037, 2158, 2003, 2652, 1037, 8928, 1012, 102,
                     1037, 2158, 2003, 2652, 1037, 2312, 8928, 1012, 102 }
      assert(enc.n == #want, "n = " .. enc.n)
      for i = 1, #want do
        assert(enc.ids[i - 1] == want[i], ("id %d: %d vs %d"):format(i, enc.ids[i - 1], want[i]))
        assert(enc.type_ids[i - 1] == (i <= 9 and 0 or 1), "type id " .. i)
      end
      C.tr_tok_encoding_free(enc)
      assert(ffi.string(C.tr_tok_id_to_token(tok, 101)) == "[CLS]")
    end },
  { "batch", function()
      local tok = load("tests/data/tok_minilm")
      local texts = ffi.new("const char *[2]", { "Hello, world!", "Hi" })
      local b = ffi.new("tr_tok_batch")
      local err = ffi.new("tr_error")
      assert(C.tr_tok_encode_batch(tok, texts, nil, 2, nil, b, err) == 0, ffi.string(err.msg))
      assert(b.batch == 2 and b.seq_len == 6, ("%d x %d"):format(b.batch, b.seq_len))
      assert(b.ids[6] == 101 and b.ids[7] == 7632 and b.ids[8] == 102 and b.ids[9] == 0)
      assert(b.attention_mask[8] == 1 and b.attention_mask[9] == 0)
      C.tr_tok_batch_free(b)
    end },
  { "bad_folder", function()
      local out = ffi.new("tr_tokenizer *[1]")
      local err = ffi.new("tr_error")
      assert(C.tr_tok_load(out, root .. "/tests/nowhere", err) == 1)
      assert(ffi.string(err.msg):find("neither tokenizer.json nor vocab.txt", 1, true))
    end },
}
