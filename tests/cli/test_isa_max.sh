#!/usr/bin/env bash
# `make ISA_MAX=avx2` (core/base/isa_max.h): a build that never runs AVX-512 code, for measuring
# on an AVX-512 machine what an AVX2-only CPU runs (bench/vs_pytorch.sh ISA=avx2). Checked here
# on a few sources rather than a second whole build: the kernels' clones lose their AVX-512
# version and keep the AVX2 one, and the run-time choices of the attention tiles and the
# dropout's Philox stop at AVX2 where the uncapped build takes AVX-512. The uncapped checks make
# the capped ones meaningful only on an AVX-512 CPU; elsewhere they say SKIP.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

CC=${CC:-cc}
if ! "$CC" -v 2>&1 | grep -q '^gcc version' || [ "$(uname -m)" != x86_64 ]; then
  echo "SKIP isa_max: the clones and the cap are for GCC on x86-64"
  finish; exit $?
fi
flags=(-std=c11 -D_GNU_SOURCE -O1 -fopenmp -Icore -Icore/base -Ikernels)

# ---- the clones: an AVX2 one always, an AVX-512 one only without the cap
for cap in "" -DTR_ISA_MAX_AVX2; do
  name=${cap:+capped}; name=${name:-uncapped}
  if ! "$CC" "${flags[@]}" $cap -c kernels/cpu/activation.c -o "$TMP/act_$name.o" 2>"$TMP/err"; then
    fail "isa_max_${name}_compiles" "$(head -c 400 "$TMP/err")"; continue
  fi
  syms=$(nm "$TMP/act_$name.o")
  if grep -q '\.arch_x86_64_v3$' <<<"$syms"; then pass "isa_max_${name}_has_avx2_clones"
  else fail "isa_max_${name}_has_avx2_clones" "no .arch_x86_64_v3 symbol in activation.o"; fi
  n512=$(grep -c '\.avx512f$' <<<"$syms" || true)
  if [ "$name" = capped ]; then
    if [ "$n512" = 0 ]; then pass isa_max_capped_no_avx512_clones
    else fail isa_max_capped_no_avx512_clones "$n512 .avx512f clones in a TR_ISA_MAX_AVX2 object"; fi
  elif [ "$n512" -gt 0 ]; then pass isa_max_uncapped_has_avx512_clones
  else fail isa_max_uncapped_has_avx512_clones "no .avx512f clone in activation.o"; fi
done

# ---- the run-time choices (tr_attn_tile_isa: 2 AVX-512, 1 AVX2; tr_rng_cpu_isa the same)
cat >"$TMP/probe.c" <<'C'
#include <stdio.h>
#include "cpu/attn_tile.h"
#include "rng.h"
int main(void) { printf("%d %d\n", tr_attn_tile_isa(), (int)tr_rng_cpu_isa()); return 0; }
C
declare -A picks
for cap in "" -DTR_ISA_MAX_AVX2; do
  name=${cap:+capped}; name=${name:-uncapped}
  if "$CC" "${flags[@]}" $cap "$TMP/probe.c" kernels/cpu/attn_tile.c core/base/rng.c -lm -o "$TMP/probe_$name" \
       2>"$TMP/err"; then
    picks[$name]=$("$TMP/probe_$name")
  else fail "isa_max_${name}_probe_builds" "$(head -c 400 "$TMP/err")"; fi
done
if grep -qw avx512f /proc/cpuinfo && grep -qw avx2 /proc/cpuinfo; then
  if [ "${picks[uncapped]:-}" = "2 2" ]; then pass isa_max_uncapped_picks_avx512
  else fail isa_max_uncapped_picks_avx512 "attention tiles and Philox say '${picks[uncapped]:-}', expected '2 2'"; fi
  if [ "${picks[capped]:-}" = "1 1" ]; then pass isa_max_capped_picks_avx2
  else fail isa_max_capped_picks_avx2 "attention tiles and Philox say '${picks[capped]:-}', expected '1 1'"; fi
else
  echo "SKIP isa_max_picks: this CPU has no AVX-512 (or no AVX2) to hold back"
fi
finish
