#!/usr/bin/env bash
# User-facing messages: a bad device or a key at the wrong level
# in `trainer check`, an invalid UTF-8 line in the model commands' input, a cut-off
# metrics.jsonl in `trainer report`: each exits 1 naming the key, or the file and its line,
# never a trainer function name or a position inside a one-line text.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
D=tests/data

run_trainer check tests/recipes/ok_minimal.lua device=gpu
expect_rc check_device_gpu_rc 1
expect_err check_device_gpu 'device: expected "auto", "cpu", "cuda" or "cuda:N", got "gpu" (a GPU is "cuda")'
run_trainer check tests/recipes/ok_minimal.lua device=cuda:x
expect_rc check_device_cuda_x_rc 1
run_trainer check tests/recipes/ok_minimal.lua device=cuda:1
expect_rc check_device_cuda_1_rc 0
run_trainer check tests/recipes/ok_minimal.lua lr=1e-4
expect_err check_lr_top_level "unknown key 'lr' (did you mean 'optim.lr'?)"

printf 'hello world\nthe \377 cat\n' >"$TMP/bad.txt"
for cmd in tokenize encode; do
  run_trainer $cmd $D/tiny_bert "$TMP/bad.txt"
  expect_rc ${cmd}_bad_utf8_rc 1
  expect_err ${cmd}_bad_utf8_names_line "$TMP/bad.txt: line 2 is not valid UTF-8 (byte 5, 0xFF)"
  if grep -qF "$D/tiny_bert" "$TMP/err"; then fail ${cmd}_bad_utf8_not_model "$ERR"; else pass ${cmd}_bad_utf8_not_model; fi
done

mkdir -p "$TMP/run"
printf '{"step":1,"loss":2.5,"lr":0.001}\n{"step":2,"loss":2.4,"lr":0.001}\n{"step":3,"loss":2.' >"$TMP/run/metrics.jsonl"
run_trainer report "$TMP/run"
expect_rc report_cut_metrics_rc 1
expect_err report_cut_metrics_line "$TMP/run/metrics.jsonl: line 3 (record 3) is cut off"
if grep -qF "line 1, column" "$TMP/err"; then fail report_cut_metrics_no_column "$ERR"; else pass report_cut_metrics_no_column; fi
finish
