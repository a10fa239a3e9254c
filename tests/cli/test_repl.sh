#!/usr/bin/env bash
# The REPL with stdin not a terminal: reads a script, auto-prints, survives errors.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
expect_no_err() { if grep -qF -- "$2" "$TMP/err"; then fail "$1" "stderr has '$2'"; show; else pass "$1"; fi; }
# grep -F takes a pattern with a newline as two patterns: multi-line text is matched whole here
expect_out_text() { if [[ "$OUT" == *"$2"* ]]; then pass "$1"; else fail "$1" "stdout lacks '$2'"; show; fi; }
expect_err_text() { if [[ "$ERR" == *"$2"* ]]; then pass "$1"; else fail "$1" "stderr lacks '$2'"; show; fi; }
expect_line() { if grep -qxF -- "$2" "$TMP/out"; then pass "$1"; else fail "$1" "no stdout line '$2'"; show; fi; }

run_trainer_stdin $'print(6*7)\n' repl
expect_rc repl_print_rc 0
expect_out repl_print_42 "42"

run_trainer_stdin $'print(6*7)\n'
expect_out bare_trainer_is_repl "42"

run_trainer_stdin $'error("boom")\nprint("still here")\n' repl
expect_out repl_survives_error "still here"
expect_err repl_error_message "boom"
expect_rc repl_error_status 1
# an error names its position and prints a short traceback of the user's frames only
expect_err repl_error_position "stdin:1: boom"
expect_err_text repl_error_traceback $'stack traceback:\n\tstdin:1: in main chunk'
expect_no_err repl_traceback_no_internals "repl.lua"
expect_no_err repl_traceback_no_c_frames "[C]"

run_trainer_stdin $'function f()\n  error("deep")\nend\nf()\n' repl
expect_err repl_error_in_function_position "stdin:2: deep"
expect_err repl_traceback_names_function "in function 'f'"

# a multi-line string prints as its text (a report), not quoted with \n escapes;
# a one-line string stays quoted, so "" and " " can be told apart
run_trainer_stdin $'"first\\nsecond"\n"one line"\ntrainer.memory.report()\n' repl
expect_line repl_multiline_string_as_text "first"
expect_line repl_multiline_string_second_line "second"
expect_out repl_one_line_string_quoted '"one line"'
expect_line repl_report_as_text "memory on cpu"
expect_no_out repl_report_not_escaped '\n'

# a model prints as a summary (class, parameter count, submodules), not its tables
run_trainer_stdin $'m = trainer.load_model("tests/data/tiny_bert")\nm\nprint(m.bert.embeddings.word_embeddings)\n' repl
expect_rc repl_model_rc 0
expect_out repl_model_summary_class "SentenceEncoder: 24,032 parameters"
expect_out repl_model_summary_children "    (embeddings) BertEmbeddings: 5,888"
expect_out repl_model_summary_repeats "(layer.0-1) 2 x BertLayer: 8,544 each"
expect_out repl_model_summary_leaf "(word_embeddings) Embedding: weight [116, 32]"
expect_out_text repl_module_tostring $'Embedding: 3,712 parameters, all trainable, f32 on cpu, eval mode\n  weight [116, 32]'
expect_no_out repl_model_no_internals "_children"
lines=$(wc -l <"$TMP/out")
if [ "$lines" -le 40 ]; then pass repl_model_summary_short; else fail repl_model_summary_short "$lines lines"; show; fi

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
