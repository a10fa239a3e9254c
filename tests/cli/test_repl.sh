#!/usr/bin/env bash
# The REPL with stdin not a terminal: reads a script, auto-prints, survives errors.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

run_trainer_stdin $'print(6*7)\n' repl
expect_rc repl_print_rc 0
expect_out repl_print_42 "42"

run_trainer_stdin $'print(6*7)\n'
expect_out bare_trainer_is_repl "42"

run_trainer_stdin $'error("boom")\nprint("still here")\n' repl
expect_out repl_survives_error "still here"
expect_err repl_error_message "boom"
expect_rc repl_error_status 1

run_trainer_stdin $'1 + 1\n=2*21\nx = 5\nx\n' repl
expect_out repl_autoprint "2"
expect_out repl_equals_expr "42"

run_trainer_stdin $'function f(a)\n  return a * 2\nend\nf(21)\n' repl
expect_out repl_multiline "42"

run_trainer_stdin $'t = { a = 1 }\nt.self = t\nt\n' repl
expect_out repl_cycle "self = <cycle>"

run_trainer_stdin $'d = {a={b={c={d={e=1}}}}}\nd\n' repl
expect_out repl_depth_limit "{...}"

run_trainer_stdin $'local y = nil; print(y.z)\nprint("after")\n' repl
expect_err repl_traceback "attempt to index"
expect_out repl_after_runtime_error "after"

run_trainer_stdin $'undefined_thing\nprint("ok")\n' repl
expect_err repl_strict_globals "undefined global 'undefined_thing'"

run_trainer_stdin $':load recipes/scandi_lora.lua\nrecipe.lora.r\n:quit\nprint("not reached")\n' repl
expect_out repl_load_recipe "loaded recipes/scandi_lora.lua"
expect_out repl_recipe_bound "8"
expect_no_out repl_quit "not reached"

run_trainer_stdin $':load tests/recipes/bad_types.lua\nprint("continues")\n' repl
expect_err repl_load_error "unknown key 'lorra'"
expect_out repl_load_error_continues "continues"

run_trainer_stdin $':help\n' repl
expect_out repl_help ":load RECIPE.lua"

run_trainer_stdin $'print(1)\n' repl recipes/scandi_lora.lua
expect_out repl_with_recipe "loaded recipes/scandi_lora.lua"

# Ctrl-C stops the running chunk, not the REPL
fifo="$TMP/fifo"; mkfifo "$fifo"
"$TRAINER" repl <"$fifo" >"$TMP/out" 2>"$TMP/err" &
pid=$!
exec 3>"$fifo"
printf 'while true do end\n' >&3
sleep 1
kill -INT "$pid"
sleep 0.5
printf 'print("alive after interrupt")\n' >&3
exec 3>&-
wait "$pid"; RC=$?
OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
expect_out ctrl_c_keeps_repl "alive after interrupt"
expect_err ctrl_c_message "interrupted"

finish
