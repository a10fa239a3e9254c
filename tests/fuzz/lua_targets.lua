-- tests/fuzz/lua_targets.lua — the parsers written in Lua that tests/fuzz/fuzz_lua.c fuzzes:
-- each function takes one input (a string) and the target's temporary folder, and either
-- returns, raises a trainer user error (the input refused), or has found a bug (any other
-- error: an assert here, or an error inside trainer's code).
local ffi = require("ffi")

local M = {}

-- What a target loads before its first input (tests/fuzz/fuzz_lua.c runs it with leak
-- detection off): modules that keep allocations for the process's life.
M.prepare = {
  model_config = function() require("trainer.models.registry").families() end,
  trainer_state = function() require("trainer.core.safetensors") end,
}

-- An event file (TFRecord frames of Event protos), as a resume reads an earlier run's to cut
-- it back: the whole records found lie end to end from the start, each re-frames to its
-- own bytes, and each has a step.
function M.tfrecord(data)
  local C = require("trainer.core.ffi")
  local proto = require("trainer.train.event_proto")
  local pos = 1
  for _, r in ipairs(proto.records(data)) do
    assert(r.first == pos, "a record does not start where the previous one ended")
    assert(r.last <= #data and #r.event == r.last - r.first - 15, "a record's bounds are wrong")
    local buf = ffi.new("uint8_t[?]", #r.event + 16)
    local n = tonumber(C.tr_tfrecord_frame(buf, r.event, #r.event))
    assert(ffi.string(buf, n) == data:sub(r.first, r.last), "a record does not re-frame to its bytes")
    local step = proto.step_of(r.event)
    assert(type(step) == "number" and step >= 0, "no step")
    pos = r.last + 1
  end
end

-- A checkpoint's trainer_state, read as a resume reads it (trainer.core.safetensors over
-- the runtime, its tensors copied out and freed): the input is the decompressed state (a
-- safetensors file whose metadata holds the JSON), gzip'd here so that mutations reach the
-- layers behind the gzip check; an input that starts with the gzip magic is written as it is.
function M.trainer_state(data, tmp)
  local C = require("trainer.core.ffi")
  local dir = tmp .. "/state"
  require("trainer.core.sys").mkdir_p(dir)
  local path = dir .. "/trainer_state"
  if data:sub(1, 2) == "\31\139" then
    local f = assert(io.open(path, "wb")) f:write(data) f:close()
  else
    local gz = C.gzopen(path, "wb")
    assert(gz ~= nil, "gzopen")
    if #data > 0 then assert(C.gzwrite(gz, data, #data) == #data, "gzwrite") end
    assert(C.gzclose(gz) == 0, "gzclose")
  end
  local meta, tensors = require("trainer.train.trainer_state").read(dir, { scratch = tmp })
  for _, t in pairs(tensors) do t:free() end
  assert(type(meta) == "table" and type(meta.step) == "number", "a state read without its step")
end

-- An information-retrieval set in BEIR's layout (trainer.train.beir): the input is the three
-- files end to end, corpus.jsonl NUL queries.jsonl NUL qrels/test.tsv (a part left out is an
-- empty file). What the reader returns is consistent: every document and query has a
-- non-empty id of its own and a text, every relevant pair names a query and a document read,
-- and the summary counts them. A refusal names one of the files.
function M.beir(data, tmp)
  local beir = require("trainer.train.beir")
  local errors = require("trainer.core.errors")
  local dir = tmp .. "/beir"
  require("trainer.core.sys").mkdir_p(dir .. "/qrels")
  local parts, from = {}, 1
  for _ = 1, 2 do
    local nul = data:find("\0", from, true)
    if not nul then break end
    parts[#parts + 1] = data:sub(from, nul - 1)
    from = nul + 1
  end
  parts[#parts + 1] = data:sub(from)
  local names = { dir .. "/corpus.jsonl", dir .. "/queries.jsonl", dir .. "/qrels/test.tsv" }
  for i, path in ipairs(names) do
    local f = assert(io.open(path, "wb")) f:write(parts[i] or "") f:close()
  end
  local ok, queries, corpus, relevant, summary = pcall(beir.load, { folder = dir, split = "test" })
  if not ok then
    local e = queries
    if errors.is_user_error(e) then
      local named = false
      for _, path in ipairs(names) do named = named or e.msg:find(path, 1, true) ~= nil end
      assert(named, "a refusal that names none of the files: " .. e.msg)
    end
    error(e, 0)
  end
  local function items(list, what)
    assert(type(list) == "table" and #list > 0, "no " .. what)
    local by_id = {}
    for i, it in ipairs(list) do
      assert(type(it.id) == "string" and it.id ~= "", what .. " " .. i .. " without an id")
      assert(type(it.text) == "string", what .. " " .. it.id .. " without a text")
      assert(not by_id[it.id], what .. " id " .. it.id .. " twice")
      by_id[it.id] = it
    end
    return by_id
  end
  local c_by_id, q_by_id = items(corpus, "document"), items(queries, "query")
  local npairs, nq = 0, 0
  for qid, docs in pairs(relevant) do
    assert(q_by_id[qid], "relevant documents of a query not read: " .. tostring(qid))
    for cid, v in pairs(docs) do
      assert(v == true and c_by_id[cid], "a relevant document not read: " .. tostring(cid))
      npairs = npairs + 1
    end
  end
  for _, q in ipairs(queries) do if relevant[q.id] then nq = nq + 1 end end
  assert(nq > 0, "no query has a relevant document")
  assert(summary.documents == #corpus and summary.queries_count == #queries, "summary counts")
  assert(summary.queries_with_relevant == nq and summary.relevant_pairs == npairs, "summary pair counts")
end

-- A model's config.json, as trainer.load_model checks it: the JSON binding decodes the input
-- and trainer.models.registry.config has the family of its model_type check it. An input
-- that starts with a line "arch=NAME" is checked as a recipe's model.arch NAME chooses. A
-- checked config is the family's, of the model_type that decides, with every field the
-- family reads of its type and in its range; a refusal names the file or model.arch.
function M.model_config(data)
  local json = require("trainer.core.json")
  local registry = require("trainer.models.registry")
  local errors = require("trainer.core.errors")
  local arch, text = data:match("^arch=([^\n]*)\n(.*)$")
  text = text or data
  local raw
  local ok, cfg, family = pcall(function()
    raw = json.decode(text, "config.json")
    return registry.config(raw, "config.json", arch)
  end)
  if not ok then
    if errors.is_user_error(cfg) then
      assert(cfg.msg:find("config.json", 1, true) or cfg.msg:find("model.arch", 1, true),
        "a refusal that names neither the file nor model.arch: " .. cfg.msg)
    end
    error(cfg, 0)
  end
  assert(type(cfg) == "table" and type(family) == "table", "no config or family")
  assert(cfg.family == family.name, "the config's family is not the family's")
  local own = type(raw.model_type) == "string" and raw.model_type or nil
  assert(cfg.model_type == (own or arch or registry.default), "model_type " .. tostring(cfg.model_type)
    .. " is not the one that decides")
  assert(registry.family(cfg.model_type) == family, "model_type " .. tostring(cfg.model_type) .. " of another family")
  for _, f in ipairs(family.config_fields) do
    local v = cfg[f[1]]
    if v == nil then
      assert(not f.required, f[1] .. " is required but missing")
    elseif f[2] == "string" or f[2] == "boolean" or f[2] == "table" then
      assert(type(v) == f[2], f[1] .. " is not a " .. f[2])
    else
      assert(type(v) == "number" and (f.open_low and v > f[3] or not f.open_low and v >= f[3])
        and (f.open_high and v < f[4] or not f.open_high and v <= f[4]), f[1] .. " is out of its range")
      assert(f[2] ~= "integer" or v == math.floor(v), f[1] .. " is not whole")
    end
  end
  local n = family.max_positions(cfg)
  assert(type(n) == "number" and n >= 1 and n == math.floor(n), "max_positions is not a count")
end

return M
