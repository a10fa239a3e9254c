# tiny_fixtures.sh — sourced after lib.sh by CLI tests that train: makes, in $TMP, a tiny
# random BERT folder ($TMP/tiny), STS-like train/dev files ($TMP/train.jsonl, $TMP/dev.jsonl)
# and a recipe over them ($TMP/sts.lua: 12 steps, a checkpoint every 3, out = $TMP/runs/sts)
# whose on_step hook sends the run SIGINT at step $STOP_AT when that variable is set.
# A run takes a second or two on a CPU. The model and data: tests/cli/sts_fixture.lua.
"$TRAINER" run "$ROOT/tests/cli/sts_fixture.lua" "$TMP" 48 4 ||
  { echo "FAIL fixtures: could not make the tiny model and data"; exit 1; }
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
