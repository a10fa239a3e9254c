# tiny_fixtures.sh — sourced after lib.sh by CLI tests that train: makes, in $TMP, a tiny
# random BERT folder ($TMP/tiny), STS-like train/dev files ($TMP/train.jsonl, $TMP/dev.jsonl)
# and a recipe over them ($TMP/sts.lua: 12 steps, a checkpoint every 3, out = $TMP/runs/sts)
# whose on_step hook sends the run SIGINT at step $STOP_AT when that variable is set.
# A run takes a second or two on a CPU.
cat >"$TMP/mk_fixtures.lua" <<EOF
require("trainer.models").tiny_folder("$TMP/tiny", { seed = 1 })
local words = { "the", "cat", "dog", "sat", "on", "mat", "and", "is", "not", "good", "bad", "house", "bird", "very" }
local seed = 7
local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % n + 1 end
local function sent() local t = {} for i = 1, 3 + rnd(4) do t[i] = words[rnd(#words)] end return table.concat(t, " ") end
local function write(path, n)
  local f = assert(io.open(path, "w"))
  for _ = 1, n do f:write(('{"sentence1": "%s", "sentence2": "%s", "score": %.1f}\n'):format(sent(), sent(), rnd(50) / 10)) end
  f:close()
end
write("$TMP/train.jsonl", 48)
write("$TMP/dev.jsonl", 16)
EOF
"$TRAINER" run "$TMP/mk_fixtures.lua" || { echo "FAIL fixtures: could not make the tiny model and data"; exit 1; }
cat >"$TMP/sts.lua" <<EOF
return {
  model = { from = "$TMP/tiny" },
  data = { train = "$TMP/train.jsonl", eval = "$TMP/dev.jsonl", columns = { "sentence1", "sentence2", "score" } },
  loss = { name = "cosent" }, optim = { lr = 1e-3 }, batch = { size = 8 }, steps = 12,
  save = { every = 3, keep = 10 }, log = { every = 1 }, device = "cpu", out = "$TMP/runs/sts",
  hooks = { on_step = function(t)
    -- SIGINT to itself, as Ctrl-C sends it (not through os.execute: system() ignores SIGINT)
    if t.step == tonumber(os.getenv("STOP_AT") or "") then
      local ffi = require("ffi")
      pcall(ffi.cdef, "int kill(int pid, int sig); int getpid(void);")
      ffi.C.kill(ffi.C.getpid(), 2)
    end
  end },
}
EOF
# the same recipe without functions: resolved_recipe.lua alone holds all of it
sed '/hooks = {/,/^  end },/d' "$TMP/sts.lua" >"$TMP/plain.lua"
