-- A damaged trainer_state is named as such, never an internal error:
-- a run on a tiny random BERT saves checkpoint-3 and checkpoint-6; then each case of a
-- table of damages replaces checkpoint-6/trainer_state, a resume from it must raise a
-- user error "…/checkpoint-6/trainer_state is damaged (WHAT); resume from checkpoint-3,
-- the previous one" with WHAT naming the damage, and leave no temporary file behind. The
-- intact state still resumes, and a damaged checkpoint-3 (nothing before it) says to
-- start over.
local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local ffi = require("ffi")
local json = require("trainer.core.json")
local outputs = require("trainer.train.outputs")
local recipe = require("trainer.recipe")
local loop = require("trainer.train.loop")
local run = require("trainer.train.run")
local errors = require("trainer.core.errors")
require("trainer.train.trainer_state")   -- declares gzopen/gzread/gzclose
pcall(ffi.cdef, "int gzwrite(gzFile file, const void *buf, unsigned len);")

local tests = {}
local fx

local function write_file(path, bytes)
  local f = assert(io.open(path, "wb"))
  assert(f:write(bytes))
  assert(f:close())
end

local function gzip_bytes(path, bytes)
  local gz = ffi.C.gzopen(path, "wb6")
  assert(gz ~= nil)
  assert(#bytes == 0 or ffi.C.gzwrite(gz, bytes, #bytes) == #bytes)
  assert(ffi.C.gzclose(gz) == 0)
end

local function gunzip_bytes(path)
  local gz = ffi.C.gzopen(path, "rb")
  local parts, buf = {}, ffi.new("char[65536]")
  while true do
    local n = ffi.C.gzread(gz, buf, 65536)
    assert(n >= 0)
    if n == 0 then break end
    parts[#parts + 1] = ffi.string(buf, n)
  end
  ffi.C.gzclose(gz)
  return table.concat(parts)
end

local function u64le(n)
  local b = {}
  for i = 1, 8 do b[i] = string.char(n % 256) n = math.floor(n / 256) end
  return table.concat(b)
end

-- A safetensors file split into its decoded header and data bytes, and back.
local function split(bytes)
  local n = 0
  for i = 8, 1, -1 do n = n * 256 + bytes:byte(i) end
  return json.decode(bytes:sub(9, 8 + n)), bytes:sub(9 + n)
end
local function join(header, data)
  local h = json.encode(header)
  return u64le(#h) .. h .. data
end

local function setup()
  if fx then return fx end
  local dir = lib.tiny_pairs({ model_seed = 4, text_seed = 5, max_extra = 4, rows = 64, score_format = "%.1f",
                              score = function(rnd) return rnd(50) / 10 end })
  local path = dir .. "/r.lua"
  local f = assert(io.open(path, "w"))
  f:write(([[
return {
  model = { from = %q },
  data = { train = %q, columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosent" }, optim = { lr = 1e-3 }, batch = { size = 4 }, steps = 6,
  save = { every = 3, keep = 5 }, eval = { at_start = false }, log = { quiet = true }, device = "cpu", out = %q,
}
]]):format(dir .. "/tiny", dir .. "/train.jsonl", dir .. "/run"))
  f:close()
  assert(loop.train(recipe.load(path), { quiet = true }) == 0)
  local state = dir .. "/run/checkpoint-6/trainer_state"
  fx = { dir = dir, recipe = path, state = state, original = outputs.read(state) }
  fx.header, fx.data = split(gunzip_bytes(state))
  return fx
end

-- Builds the run resumed from `ckpt` (default checkpoint-6); returns ok, error message.
local function resume(ckpt)
  local d = setup()
  local r = recipe.load(d.recipe, { "resume=" .. d.dir .. "/run/" .. (ckpt or "checkpoint-6") })
  local ok, t = pcall(run.build, r, { quiet = true })
  if ok then t:free() return true end
  return false, t
end

local function no_tmp_left()
  local p = io.popen("ls -a " .. outputs.quote(setup().dir .. "/run"))
  for name in p:lines() do assert(not name:match("%.tmp$"), "left behind: " .. name) end
  p:close()
end

-- The header with its trainer_state JSON changed by fn(meta).
local function with_meta(fn)
  local d = setup()
  local h = json.decode(json.encode(d.header))
  local meta = json.decode(h.__metadata__.trainer_state)
  fn(meta)
  h.__metadata__.trainer_state = json.encode(meta)
  return join(h, d.data)
end

-- The name of an optimizer moment of a 2-D parameter with two different dimensions.
local function matrix_moment(h)
  for name, e in pairs(h) do
    if name:match("%.m$") and type(e) == "table" and #e.shape == 2 and e.shape[1] ~= e.shape[2] then return name end
  end
  error("no 2-D moment in the state")
end

-- A copy of the fixture's header, for a case to damage.
local function header_copy() return json.decode(json.encode(setup().header)) end

-- A header copy, the name of its first matrix moment and that moment's entry.
local function moment_copy()
  local h = header_copy()
  local name = matrix_moment(h)
  return h, name, h[name]
end

-- { name, writes the damaged file at path, pattern WHAT must contain }
local cases = {
  { "not_gzip", function(p) write_file(p, "this is not a gzip stream at all") end, "gzip" },
  { "cut_gzip", function(p) write_file(p, setup().original:sub(1, math.floor(#setup().original / 2))) end, "gzip" },
  { "empty_stream", function(p) gzip_bytes(p, "") end, "empty" },
  { "huge_header_length", function(p) gzip_bytes(p, u64le(2 ^ 52) .. "{}") end, "header length" },
  { "header_longer_than_file", function(p) gzip_bytes(p, u64le(5000) .. "{}") end, "header claims" },
  { "gzip_bomb", function(p)
      local gz = ffi.C.gzopen(p, "wb6")
      local zeros = string.rep("\0", 1024 * 1024)
      for _ = 1, 20 do ffi.C.gzwrite(gz, zeros, #zeros) end
      ffi.C.gzclose(gz)
    end, "decompresses to more than" },
  { "metadata_not_object", function(p)
      local h = header_copy()
      h.__metadata__ = 5
      gzip_bytes(p, join(h, setup().data))
    end, "metadata" },
  { "no_trainer_state_key", function(p)
      local h = header_copy()
      h.__metadata__ = { other = "x" }
      gzip_bytes(p, join(h, setup().data))
    end, "no trainer_state metadata" },
  { "trainer_state_not_json", function(p)
      local h = header_copy()
      h.__metadata__.trainer_state = "{step: six"
      gzip_bytes(p, join(h, setup().data))
    end, "not valid JSON" },
  { "missing_rng", function(p) gzip_bytes(p, with_meta(function(m) m.rng = nil end)) end, "rng is nothing" },
  { "missing_optimizer", function(p) gzip_bytes(p, with_meta(function(m) m.optimizer = nil end)) end, "optimizer is nothing" },
  { "step_is_a_string", function(p) gzip_bytes(p, with_meta(function(m) m.step = "six" end)) end, 'step is "six"' },
  { "step_1e18", function(p) gzip_bytes(p, with_meta(function(m) m.step = 1e18 end)) end, "step" },
  { "step_not_the_folder", function(p) gzip_bytes(p, with_meta(function(m) m.step = 5 end)) end, "checkpoint%-6" },
  { "negative_data_position", function(p) gzip_bytes(p, with_meta(function(m) m.data.position = -2 end)) end, "data.position" },
  { "data_position_past_epoch", function(p) gzip_bytes(p, with_meta(function(m) m.data.position = 1e6 end)) end, "data.position" },
  { "rng_step_mistyped", function(p) gzip_bytes(p, with_meta(function(m) m.rng.step = { 1 } end)) end, "rng.step" },
  { "optimizer_step_table_mistyped", function(p)
      gzip_bytes(p, with_meta(function(m) m.optimizer.step = 3 end))
    end, "optimizer.step" },
  { "transposed_moment", function(p)
      local h, name = moment_copy()
      h[name].shape = { h[name].shape[2], h[name].shape[1] }
      gzip_bytes(p, join(h, setup().data))
    end, "where the parameter needs" },
  { "moment_of_unknown_parameter", function(p)
      local h, name, e = moment_copy()
      h[name] = nil
      h["optimizer.no.such.param.m"] = e
      gzip_bytes(p, join(h, setup().data))
    end, "optimizer.step does not list" },
  { "missing_moment", function(p)
      local h, name, e = moment_copy()
      -- drop the tensor: its bytes go, the tensors after it move down
      local a, b = e.data_offsets[1], e.data_offsets[2]
      local data = setup().data:sub(1, a) .. setup().data:sub(b + 1)
      h[name] = nil
      for _, x in pairs(h) do
        if type(x) == "table" and x.data_offsets and x.data_offsets[1] >= b then
          x.data_offsets = { x.data_offsets[1] - (b - a), x.data_offsets[2] - (b - a) }
        end
      end
      gzip_bytes(p, join(h, data))
    end, "is missing" },
}

tests[#tests + 1] = { "intact_state_resumes", function()
  local ok, err = resume()
  assert(ok, errors.message(err))
  no_tmp_left()
end }

tests[#tests + 1] = { "damaged_states", function()
  local d = setup()
  local failures = {}
  for _, case in ipairs(cases) do
    local name, damage, what = case[1], case[2], case[3]
    damage(d.state)
    local ok, err = resume()
    write_file(d.state, d.original)
    local msg = errors.message(err)
    if ok then
      failures[#failures + 1] = name .. ": the damaged state was accepted"
    elseif not errors.is_user_error(err) then
      failures[#failures + 1] = name .. ": not a user error: " .. msg
    else
      if os.getenv("SHOW_DAMAGE") then print(msg) end
    local inner = msg:match("checkpoint%-6/trainer_state is damaged %((.*)%); resume from checkpoint%-3, the previous one")
      if not inner then
        failures[#failures + 1] = name .. ": unexpected message: " .. msg
      elseif not inner:find(what) then
        failures[#failures + 1] = ("%s: the damage %q does not mention %q"):format(name, inner, what)
      end
    end
    local tok, terr = pcall(no_tmp_left)
    if not tok then failures[#failures + 1] = name .. ": " .. tostring(terr) end
  end
  assert(#failures == 0, #failures .. " of " .. #cases .. " cases failed:\n" .. table.concat(failures, "\n"))
end }

tests[#tests + 1] = { "damaged_first_checkpoint_says_start_over", function()
  local d = setup()
  local state = d.dir .. "/run/checkpoint-3/trainer_state"
  local original = outputs.read(state)
  write_file(state, "garbage")
  local ok, err = resume("checkpoint-3")
  write_file(state, original)
  assert(not ok and errors.is_user_error(err), "expected a user error, got " .. tostring(err))
  local msg = errors.message(err)
  assert(msg:find("checkpoint-3/trainer_state is damaged", 1, true) and msg:find("without resume", 1, true), msg)
end }

return lib.with_cleanup(tests, function()
  if fx then outputs.remove_tree(fx.dir) end
  fx = nil
end)
