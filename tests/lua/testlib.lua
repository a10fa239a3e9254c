-- tests/lua/testlib.lua — what the Lua test files share (not a test: run.lua loads only
-- test_*.lua): a fresh temporary folder, whole-file write and read, and the tiny training
-- fixture (a random BERT folder and a JSONL file of sentence pairs with scores).
--   local lib = dofile(require("trainer.native").root() .. "/tests/lua/testlib.lua")
local native = require("trainer.native")

local M = {}

-- A new empty folder under /tmp.
function M.tmpdir()
  local name = os.tmpname() -- a fresh file; the folder goes beside it
  os.remove(name)
  assert(native.mkdir_p(name))
  return name
end

function M.write(path, text)
  assert(native.write_file(path, text))
end

function M.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- A folder holding tiny/ (models.tiny_folder with model_seed) and train.jsonl: `rows`
-- pairs of 3 to 2 + max_extra random words and a score from score(rnd), all drawn from a
-- linear congruential generator seeded with text_seed (so a test's data never changes).
function M.tiny_pairs(opts)
  local dir = M.tmpdir()
  require("trainer.models").tiny_folder(dir .. "/tiny", { seed = opts.model_seed })
  local words = { "the", "cat", "dog", "sat", "on", "mat", "and", "is", "not", "good", "bad", "house", "bird" }
  local seed = opts.text_seed
  local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % n + 1 end
  local function sent()
    local t = {}
    for i = 1, 2 + rnd(opts.max_extra) do t[i] = words[rnd(#words)] end
    return table.concat(t, " ")
  end
  local lines = {}
  for i = 1, opts.rows do
    lines[i] = ('{"sentence1": "%s", "sentence2": "%s", "score": ' .. opts.score_format .. '}\n'):format(sent(), sent(),
      opts.score(rnd))
  end
  M.write(dir .. "/train.jsonl", table.concat(lines))
  return dir
end

-- n deterministic data rows for step and loss tests: row i holds ntexts texts of 3 to 8 words
-- (text c drawn with salt 11 c), then target(i) when target is given. The same rows in every
-- test that uses them, so their figures never depend on which test wrote the generator.
local row_words = { "the", "cat", "dog", "sat", "on", "mat", "and", "is", "a", "not", "good", "bad", "house", "bird",
  "very", "this", "that", "with" }
function M.text(i, salt)
  local out, n = {}, 3 + (i * 5 + salt) % 6
  for k = 1, n do out[k] = row_words[(i * 7 + k * (salt + 3) + salt) % #row_words + 1] end
  return table.concat(out, " ")
end
function M.rows_of(n, ntexts, target)
  local rows = {}
  for i = 1, n do
    local r = {}
    for c = 1, ntexts do r[c] = M.text(i, c * 11) end
    if target then r[#r + 1] = target(i) end
    rows[i] = r
  end
  return rows
end

-- The test list with a last case, "cleanup", that runs fn (removing the suite's fixture).
function M.with_cleanup(tests, fn)
  tests[#tests + 1] = { "cleanup", fn }
  return tests
end

return M
