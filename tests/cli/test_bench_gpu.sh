#!/usr/bin/env bash
# bench/gpu/run.sh's smoke mode (--device cpu --tiny), which needs no Python libraries: it
# writes the shared weights and batch, runs the trainer side of every configuration at 16 and
# 48 rows and prints the table (PyTorch's columns "-" here). The plumbing only: the figures
# are never asserted (no timed tests).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
PYTHON=/nonexistent/python TRAINER="$TRAINER" bash bench/gpu/run.sh --device cpu --tiny --warmup 1 --steps 1 \
  --out "$TMP/bg" >"$TMP/out" 2>"$TMP/err"
RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
expect_rc bench_gpu_smoke_rc 0
expect_out bench_gpu_smoke_header "| config          | rows | tok/s ours |"
expect_out bench_gpu_smoke_no_torch "PyTorch side: not run"
n=$(grep -cE '^\| (fp32-full|bf16-full|bf16-ckpt|bf16-ckpt-lora) +\| +(16|48) \| +[0-9.]+ \|' "$TMP/out")
if [ "$n" = 8 ]; then pass bench_gpu_smoke_rows; else fail bench_gpu_smoke_rows "$n of 8 rows measured"; show; fi
for f in config.json model.safetensors batch.safetensors; do
  if [ -s "$TMP/bg/weights_tiny/$f" ]; then pass "bench_gpu_wrote_$f"; else fail "bench_gpu_wrote_$f" "missing"; fi
done
# the trainer side's losses are those of the same weights and batch: two runs agree bitwise
a=$("$TRAINER" run bench/gpu/trainer_side.lua --train "$TMP/bg/weights_tiny" --config fp32-full --rows 16 \
  --device cpu --warmup 0 --steps 2 --losses | sed -n 's/.*losses=//p')
b=$("$TRAINER" run bench/gpu/trainer_side.lua --train "$TMP/bg/weights_tiny" --config fp32-full --rows 16 \
  --device cpu --warmup 0 --steps 2 --losses | sed -n 's/.*losses=//p')
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass bench_gpu_losses_repeat; else fail bench_gpu_losses_repeat "'$a' vs '$b'"; fi
finish
