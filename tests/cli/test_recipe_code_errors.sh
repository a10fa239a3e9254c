#!/usr/bin/env bash
# A recipe's own code failing: an error() or a runtime error inside a
# recipe's hook, loop or eval.fn is the recipe's error — exit 1, the message names the
# recipe file and line and which function trainer was calling — never "internal error".
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_fixtures.sh"
cd "$ROOT"

# line numbers matter below: the error() is on line 4 of each recipe, its caller on line 6
cat >"$TMP/hook_error.lua" <<EOF
return {
  extends = "$TMP/plain.lua", out = "$TMP/runs/hook_error",
  hooks = { on_step = function(t, m)
    if t.step == 2 then error("boom at step two") end
  end },
}
EOF
cat >"$TMP/helper_error.lua" <<EOF
local function check(m)
  local limit = nil
  -- a runtime error two frames down in the recipe's own code
  return m.loss < limit.max
end
return { extends = "$TMP/plain.lua", out = "$TMP/runs/helper_error",
  hooks = { on_eval = function(t, scores) local ok = check({ loss = 1 }) return ok end } }
EOF
cat >"$TMP/loop_error.lua" <<EOF
return {
  extends = "$TMP/plain.lua", out = "$TMP/runs/loop_error",
  loop = function(t)
    t:train_step() error({ code = 7 })
  end,
}
EOF
cat >"$TMP/eval_error.lua" <<EOF
return {
  extends = "$TMP/plain.lua", out = "$TMP/runs/eval_error",
  eval = { fn = function(t)
    error("no gold scores", 0)
  end },
}
EOF

for name in hook_error helper_error loop_error eval_error; do
  run_trainer "$TMP/$name.lua" --quiet
  expect_rc ${name}_exit_1 1
  if grep -q "internal error" "$TMP/err"; then fail ${name}_not_internal "$ERR"; else pass ${name}_not_internal; fi
done

run_trainer "$TMP/hook_error.lua" --quiet
expect_err hook_error_names_line "$TMP/hook_error.lua:4: boom at step two"
expect_err hook_error_names_hook "The recipe's hooks.on_step raised this error"
run_trainer "$TMP/helper_error.lua" --quiet
expect_err helper_error_names_line "$TMP/helper_error.lua:4: attempt to index local 'limit'"
expect_err helper_error_names_hook "hooks.on_eval"
expect_err helper_error_traceback "$TMP/helper_error.lua:7"
run_trainer "$TMP/loop_error.lua" --quiet
expect_err loop_error_names_line "$TMP/loop_error.lua:4:"
expect_err loop_error_names_loop "The recipe's loop raised this error"
run_trainer "$TMP/eval_error.lua" --quiet
expect_err eval_error_adds_position "$TMP/eval_error.lua:4: no gold scores"
expect_err eval_error_names_fn "eval.fn"

# the metrics of the steps done before the error are kept, whole
if [ "$(wc -l <"$TMP/runs/hook_error/metrics.jsonl")" -ge 1 ]; then pass hook_error_keeps_metrics; else fail hook_error_keeps_metrics "empty"; fi

finish
