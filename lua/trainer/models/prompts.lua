-- trainer.models.prompts: sentence-transformers' prompts. A prompt is text put before every
-- text of a column before tokenising ("query: "); a model folder names its prompts in
-- config_sentence_transformers.json ({ prompts = { query = "query: " }, default_prompt_name =
-- "query" }). When the folder's Pooling config says include_prompt = false, the prompt's
-- tokens are left out of the pooling (not of the attention): the first prompt_length
-- positions of each row, where prompt_length is the prompt's own token count with the
-- leading special tokens and without a trailing one ([CLS] + its words for BERT), as
-- sentence-transformers' Transformer._get_prompt_length counts it.
--
--   prompts.resolve(model, name, text)   -> the prompt text (or nil): text when given, else
--                                           the model's prompt called name, else its default
--   prompts.length(tok, prompt)          -> prompt_length
--   prompts.pool_length(model, tok, prompt) -> prompt_length, or 0 where the model pools the prompt
--   prompts.pool_mask(mask, B, L, lengths) -> a host i32 copy of mask [B, L] with the first
--                                           lengths[r] (or lengths, a number) of row r zeroed
local ffi = require("ffi")
local errors = require("trainer.core.errors")

local M = {}

-- The prompt text sentence-transformers' encode(prompt_name=name, prompt=text) would use.
function M.resolve(model, name, text)
  if text ~= nil then return text ~= "" and text or nil end
  local known = model.prompts or {}
  if name == nil then name = model.default_prompt_name end
  if name == nil then return nil end
  local p = known[name]
  -- sentence-transformers knows "query" and "document" on every model, as empty prompts
  if p == nil and (name == "query" or name == "document") then return nil end
  if p == nil then
    local names = {}
    for k in pairs(known) do names[#names + 1] = k end
    table.sort(names)
    errors.user("prompt %q: the model has no prompt of that name (%s)", tostring(name),
      #names > 0 and ("its prompts: " .. table.concat(names, ", ")) or
      "its config_sentence_transformers.json names no prompts")
  end
  return p ~= "" and p or nil
end

-- The number of leading positions the prompt takes in a tokenised "prompt .. text".
local cache = setmetatable({}, { __mode = "k" })
function M.length(tok, prompt)
  local per = cache[tok]
  if not per then per = {}; cache[tok] = per end
  if per[prompt] then return per[prompt] end
  local with = tok:encode(prompt)
  local bare = tok:encode(prompt, { add_special_tokens = false })
  -- the specials tokenisation adds after the words: at most one is counted off, as
  -- sentence-transformers drops the last token when it is special
  local n = #with
  if #with > #bare then
    local tail_special = true
    for i = 1, #bare do
      if with[#with - #bare + i] ~= bare[i] then tail_special = true; break end
      tail_special = false
    end
    if #bare == 0 or tail_special then n = n - 1 end
  end
  per[prompt] = n
  return n
end

-- A host copy of the attention mask [B, L] (int32) with each row's prompt positions zeroed.
function M.pool_mask(mask, B, L, lengths)
  local out = ffi.new("int32_t[?]", B * L)
  ffi.copy(out, mask, B * L * 4)
  for r = 0, B - 1 do
    local n = type(lengths) == "table" and (lengths[r + 1] or 0) or lengths
    for c = 0, math.min(n, L) - 1 do out[r * L + c] = 0 end
  end
  return out
end

-- The prompt_length a batch of texts after prompt passes to the tokenizer: 0 unless the
-- model's pooling leaves the prompt out.
function M.pool_length(model, tok, prompt)
  if not prompt or prompt == "" or model.include_prompt ~= false then return 0 end
  return M.length(tok, prompt)
end

-- The prompt of each text column (a list by column index; nil where none) from data.prompts
-- (a string for every column, or { column = text }) and the dataset's columns; a name that
-- is not a text column is a user error.
function M.of_columns(spec, columns, ntexts, what)
  if spec == nil then return nil end
  local out = {}
  if type(spec) == "string" then
    for c = 1, ntexts do out[c] = spec ~= "" and spec or nil end
    return out
  end
  local index = {}
  for c = 1, ntexts do index[columns[c]] = c end
  for name, text in pairs(spec) do
    if type(text) ~= "string" then
      errors.user("%s.%s: a prompt is a string (prompts by dataset need several training datasets)", what or "data.prompts",
        tostring(name))
    end
    if not index[name] then
      local names = {}
      for c = 1, ntexts do names[c] = columns[c] end
      errors.user("%s.%s: not a text column of the training data (its text columns: %s)", what or "data.prompts",
        tostring(name), table.concat(names, ", "))
    end
    out[index[name]] = text ~= "" and text or nil
  end
  return out
end

-- The prompts a checkpoint's config_sentence_transformers.json names: the model folder's,
-- then data.prompts' under their column names (a single prompt for every column: under
-- "default"). nil when there are none.
function M.to_save(model, spec)
  local out, any = {}, false
  for k, v in pairs(model.prompts or {}) do out[k] = v; any = true end
  if type(spec) == "string" then out.default = spec; any = true
  elseif type(spec) == "table" then for k, v in pairs(spec) do out[k] = v; any = true end end
  return any and out or nil
end

-- Whether any row has a prompt to leave out of the pooling.
function M.any(lengths)
  if type(lengths) == "number" then return lengths > 0 end
  if type(lengths) == "table" then
    for _, n in pairs(lengths) do if n > 0 then return true end end
  end
  return false
end

return M
