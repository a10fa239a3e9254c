-- trainer.core.tokenizer: Hugging Face compatible tokenizers from Lua, over core/tokenizer/tokenizer.h.
--
--   local tok = require("trainer.core.tokenizer").load("models/all-MiniLM-L6-v2")
--   tok:encode("Hello world")              --> { 101, 7592, 2088, 102 }  (specials included)
--   tok:encode("premise", "hypothesis")    --> ids, type_ids (pairs: [CLS] A [SEP] B [SEP])
--   local b = tok:batch({ "a", "b c" } or { { "premise", "hyp" }, ... },
--                       { max_length = 128, truncation = true, padding = "longest",
--                         add_special_tokens = true, device = "cpu" })
--   b.input_ids, b.attention_mask, b.token_type_ids   -- i32 [B, T] tensors; the caller frees
--   tok:free()
-- The tokenizer is immutable and its C batch encoder runs rows in parallel. Errors
-- (missing or broken tokenizer files, invalid UTF-8) are user errors naming the file.
local ffi = require("ffi")
local C = require("trainer.core.ffi")
local runtime = require("trainer.core.runtime")
local T = require("trainer.core.tensor")
local errors = require("trainer.core.errors")

local M = {}

local Tokenizer = {}
Tokenizer.__index = Tokenizer

function M.load(dir)
  if type(dir) ~= "string" then errors.user("tokenizer.load(dir): dir must be a model folder path") end
  local out, err = ffi.new("tr_tokenizer*[1]"), ffi.new("tr_error")
  if C.tr_tok_load(out, dir, err) ~= 0 then
    if err.status == C.TR_EOOM then errors.oom(ffi.string(err.msg)) end
    errors.user("%s", ffi.string(err.msg))
  end
  return setmetatable({ dir = dir, _h = ffi.gc(out[0], C.tr_tok_free) }, Tokenizer)
end

function Tokenizer:handle()
  if self._h == nil then errors.user("%s: this tokenizer was freed", self.dir) end
  return self._h
end

function Tokenizer:free() runtime.release(self, "_h", C.tr_tok_free) end

local function options(opts)
  opts = opts or {}
  local o = ffi.new("tr_tok_options")
  o.add_special_tokens = opts.add_special_tokens == false and 0 or 1
  local max = 0
  if opts.truncation ~= false and opts.max_length then max = opts.max_length end
  o.max_length = max
  o.pad_to = 0
  if opts.padding == "max_length" then o.pad_to = opts.max_length or 0
  elseif opts.padding ~= nil and opts.padding ~= "longest" and opts.padding ~= true then
    errors.user("tokenizer: padding %q is unknown (\"longest\" or \"max_length\")", tostring(opts.padding))
  end
  return o
end

local function check_text(s, what)
  if type(s) ~= "string" then errors.user("tokenizer: %s must be a string, got %s", what, type(s)) end
end

-- ids (and type ids) of one text or pair; opts: add_special_tokens, max_length.
function Tokenizer:encode(text, pair, opts)
  if type(pair) == "table" then opts, pair = pair, nil end
  check_text(text, "text")
  if pair ~= nil then check_text(pair, "pair") end
  local enc, err = ffi.new("tr_tok_encoding"), ffi.new("tr_error")
  -- the text is the caller's, not the model folder's: the message names the text alone
  if C.tr_tok_encode(self:handle(), text, pair, options(opts), enc, err) ~= 0 then
    if err.status == C.TR_EOOM then errors.oom(ffi.string(err.msg)) end
    errors.user("%s", ffi.string(err.msg))
  end
  local ids, types = {}, {}
  for i = 0, enc.n - 1 do ids[i + 1] = enc.ids[i]; types[i + 1] = enc.type_ids[i] end
  C.tr_tok_encoding_free(enc)
  return ids, types
end

-- texts: a list of strings, or of { text, pair } tables, encoded into the C batch (a
-- tr_tok_batch with host ids, type ids and attention mask [B, T]; the caller frees it with
-- C.tr_tok_batch_free). tok:batch makes tensors of it; trainer.train.batch_feed copies it
-- straight into a pinned slot for the device.
function Tokenizer:encode_host(texts, opts)
  opts = opts or {}
  if type(texts) ~= "table" or #texts == 0 then errors.user("tokenizer:batch needs a non-empty list of texts") end
  local n = #texts
  local a, b = ffi.new("const char*[?]", n), nil
  for i, t in ipairs(texts) do
    if type(t) == "table" then
      check_text(t[1], ("text %d"):format(i))
      if t[2] ~= nil then check_text(t[2], ("pair %d"):format(i)) end
      b = b or ffi.new("const char*[?]", n)
      a[i - 1], b[i - 1] = t[1], t[2]
    else
      check_text(t, ("text %d"):format(i))
      a[i - 1] = t
    end
  end
  local out, err = ffi.new("tr_tok_batch"), ffi.new("tr_error")
  if C.tr_tok_encode_batch(self:handle(), a, b, n, options(opts), out, err) ~= 0 then
    if err.status == C.TR_EOOM then errors.oom(ffi.string(err.msg)) end
    errors.user("%s", ffi.string(err.msg))
  end
  return out
end

-- { input_ids, attention_mask, token_type_ids } tensors [B, L] from host i32 arrays of
-- B x L (on device when given); on failure the tensors made so far are freed (T.scope).
local function batch_tensors(ids, mask, types, B, L, device, prompt_length)
  return T.scope(function()
    local parts = { input_ids = ids, attention_mask = mask, token_type_ids = types }
    local prompts = require("trainer.models.prompts")
    if prompts.any(prompt_length) then parts.pool_mask = prompts.pool_mask(mask, B, L, prompt_length) end
    local result = {}
    for name, src in pairs(parts) do result[name] = M.host_tensor(src, B, L, device) end
    return result
  end)
end

-- A new i32 tensor [B, L] of the host array src (on device when given).
function M.host_tensor(src, B, L, device)
  local t = T.empty({ B, L }, { dtype = "i32", tag = "activations" })
  runtime.check(C.tr_tensor_write(runtime.ctx, t:ptr(), src, B * L * 4), "tokenizer:batch")
  if device and device ~= "cpu" then
    local d = t:to({ device = device })
    t:free()
    t = d
  end
  return t
end

-- texts: a list of strings, or of { text, pair } tables. Returns { input_ids,
-- attention_mask, token_type_ids } (i32 tensors [B, T], tag activations, opts.device).
-- opts.prompt_length (a number, or one per text) adds pool_mask: the attention mask with
-- each row's first prompt_length positions zeroed, what a pooling that leaves the prompt
-- out reads (trainer.models.prompts).
function Tokenizer:batch(texts, opts)
  opts = opts or {}
  local out = self:encode_host(texts, opts)
  local ok, result = pcall(batch_tensors, out.ids, out.attention_mask, out.type_ids,
    tonumber(out.batch), tonumber(out.seq_len), opts.device, opts.prompt_length)
  C.tr_tok_batch_free(out)
  if not ok then error(result, 0) end
  return result
end

-- Inference batching by token count, what `trainer encode` runs: every text is tokenized
-- once, the texts are ordered longest first by their number of tokens (ties in input
-- order), and batch(first, last) makes the tensors of order[first..last] padded to the
-- longest of them. sentence-transformers orders by characters; ordering by tokens pads
-- far less (1000 SICK premises, batches of 32: 3.8 % padding tokens against 22 %): the
-- attention runs on the padded layout, with the packing copies around it
-- (trainer.nn.packing), and a batch of one length needs no packing at all.
--   local s = tok:by_length(texts, { max_length = 256, device = "cpu" })
--   for first = 1, s.n, 32 do local b = s:batch(first, math.min(first + 31, s.n)) ... end
--   s:free()
-- s.order[k] is the input index (1-based) of the k-th text in that order.
local Sorted = {}
Sorted.__index = Sorted

function Tokenizer:by_length(texts, opts)
  opts = opts or {}
  local host = ffi.gc(self:encode_host(texts, opts), C.tr_tok_batch_free)
  local n, L = tonumber(host.batch), tonumber(host.seq_len)
  local len, order = {}, {}
  for i = 0, n - 1 do
    local mask, l = host.attention_mask + i * L, 0
    while l < L and mask[l] ~= 0 do l = l + 1 end  -- padding "longest" masks a row's tail only
    len[i + 1], order[i + 1] = l, i + 1
  end
  table.sort(order, function(a, b)
    if len[a] ~= len[b] then return len[a] > len[b] end
    return a < b
  end)
  return setmetatable({ host = host, n = n, L = L, len = len, order = order, device = opts.device,
    prompt_length = opts.prompt_length }, Sorted)
end

function Sorted:batch(first, last)
  if self.host == nil then errors.user("tokenizer:by_length: this batching was freed") end
  local B, L, W = last - first + 1, self.len[self.order[first]], self.L
  if L == 0 then L = 1 end  -- add_special_tokens = false and only empty texts
  local ids, mask, types = ffi.new("int32_t[?]", B * L), ffi.new("int32_t[?]", B * L), ffi.new("int32_t[?]", B * L)
  for r = 0, B - 1 do
    local src = (self.order[first + r] - 1) * W   -- rows after the first are no longer than it
    ffi.copy(ids + r * L, self.host.ids + src, L * 4)
    ffi.copy(mask + r * L, self.host.attention_mask + src, L * 4)
    ffi.copy(types + r * L, self.host.type_ids + src, L * 4)
  end
  local pl = self.prompt_length
  if type(pl) == "table" then
    local rows = {}
    for r = 1, B do rows[r] = pl[self.order[first + r - 1]] end
    pl = rows
  end
  return batch_tensors(ids, mask, types, B, L, self.device, pl)
end

function Sorted:free()
  if self.host ~= nil then
    local h = self.host
    self.host = nil
    ffi.gc(h, nil)
    C.tr_tok_batch_free(h)
  end
end

function Tokenizer:vocab_size() return tonumber(C.tr_tok_vocab_size(self:handle())) end
function Tokenizer:pad_id() return tonumber(C.tr_tok_pad_id(self:handle())) end
function Tokenizer:model_max_length() return tonumber(C.tr_tok_model_max_length(self:handle())) end

function Tokenizer:id_to_token(id)
  local s = C.tr_tok_id_to_token(self:handle(), id)
  if s == nil then return nil end
  return ffi.string(s)
end

function Tokenizer:token_to_id(tok)
  local id = C.tr_tok_token_to_id(self:handle(), tok)
  if id < 0 then return nil end
  return tonumber(id)
end

-- Frees every tensor of a batch table.
function M.free_batch(b)
  for _, t in pairs(b) do if T.is_tensor(t) then t:free() end end
end

return M
