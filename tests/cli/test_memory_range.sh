#!/usr/bin/env bash
# The CPU allocator's growable range under an address-space limit (`ulimit -v`, RLIMIT_AS):
# the range reserves at most half of it, so what the libraries map for themselves (OpenBLAS's
# buffer, which it retries without end when refused) still fits, and a small full fine-tune
# finishes (within a time limit: a refused buffer would spin) with the usual memory line.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

(
  ulimit -v 1500000
  exec timeout 120 "$TRAINER" run bench/train_step.lua --config fp32-full --family bert --layers 2 --warmup 1 \
    --steps 2 >"$TMP/out" 2>"$TMP/err" </dev/null
)
RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
expect_rc address_space_limit_run_rc 0
expect_out address_space_limit_run_steps "peak_reserved="
finish
