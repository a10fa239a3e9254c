#!/usr/bin/env bash
# tools/cudacpu/tests/run.sh OUT — the emulator's own tests, against the CUDA_HOME folder OUT
# that `make -C tools/cudacpu OUT=...` built. Each check the emulator claims is a deliberately
# broken kernel that must be flagged (the launch fails with the expected message, ASan
# reports, or the result differs) beside its correct twin that must pass, run under the
# schedule orders and stream modes the case names in brackets. Programs are built as the
# project builds its kernels (bin/nvcc -O2 -std=c++17 -c, then g++ with libcudart_static.a;
# the ASan ones with libcudart_asan.a and -fsanitize=address,undefined).
# Prints PASS/FAIL/SKIP lines and `N passed, N failed, N skipped`; exits 1 on any failure.
set -u
[ $# -eq 1 ] || { echo "usage: tests/run.sh OUT" >&2; exit 2; }
OUT=$(cd "$1" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
NVCC="$HERE/../bin/nvcc"
B="$OUT/tests"
mkdir -p "$B" || exit 2
passed=0 failed=0 skipped=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
skip() { echo "SKIP $1: $2"; skipped=$((skipped + 1)); }

# build PROG [asan]: $B/PROG or $B/PROG.asan from tests/PROG.cu; a failure is a FAIL line
build() {
  local prog=$1 kind=${2:-rel} exe obj log
  exe="$B/$prog$([ "$kind" = asan ] && echo .asan)"; obj="$exe.o"; log="$exe.build.log"
  if [ "$kind" = asan ]; then
    "$NVCC" -O1 -g -std=c++17 -fsanitize=address,undefined -fno-sanitize-recover=undefined \
      -Xcompiler -Wall,-Wextra,-Werror -c "$HERE/$prog.cu" -o "$obj" >"$log" 2>&1 &&
      g++ -fsanitize=address,undefined -o "$exe" "$obj" "$OUT/lib64/libcudart_asan.a" -lpthread >>"$log" 2>&1
  else
    "$NVCC" -O2 -std=c++17 -Xcompiler -Wall,-Wextra,-Werror -c "$HERE/$prog.cu" -o "$obj" >"$log" 2>&1 &&
      g++ -o "$exe" "$obj" "$OUT/lib64/libcudart_static.a" -lpthread >>"$log" 2>&1
  fi || { fail "build_$prog${2:+_$2}" "$(grep -m1 -E 'error|undefined' "$log")"; return 1; }
}

# the reason a run gave: its "why:" line, else its last line of output
reason() { grep -a -m1 '^why:' "$1" | cut -c6- || true; }
last_words() { local r; r=$(reason "$1"); [ -n "$r" ] && echo "$r" || tail -n1 "$1"; }

# expect_ok NAME EXE CASE [VAR=VALUE...]: exits 0
expect_ok() {
  local name=$1 exe=$2 case=$3 log="$B/$1.log"; shift 3
  [ -x "$exe" ] || { skip "$name" "not built"; return; }
  if env "$@" timeout 300 "$exe" "$case" >"$log" 2>&1; then pass "$name"; else fail "$name" "$(last_words "$log")"; fi
}

# expect_exit NAME STATUS PATTERN EXE CASE [VAR=VALUE...]: exits STATUS, output matches PATTERN
expect_exit() {
  local name=$1 want=$2 pattern=$3 exe=$4 case=$5 log="$B/$1.log" rc; shift 5
  [ -x "$exe" ] || { skip "$name" "not built"; return; }
  env "$@" timeout 300 "$exe" "$case" >"$log" 2>&1; rc=$?
  if [ "$rc" = "$want" ] && grep -a -q -E "$pattern" "$log"; then pass "$name"
  else fail "$name" "exit $rc (want $want), output $(grep -a -c -E "$pattern" "$log") lines matching '$pattern': $(last_words "$log")"; fi
}

ORDERS="fwd rev rand warpfwd warprev"

# ------------------------------------------------------------ the scheduler's checks
if build sync_checks; then
  S="$B/sync_checks"
  expect_ok "missing_syncthreads[warprev]" "$S" missing_syncthreads CUDACPU_SCHEDULE=warprev
  expect_ok "missing_syncthreads_hidden[fwd]" "$S" missing_syncthreads CUDACPU_SCHEDULE=fwd
  for c in barrier_deadlock barrier_divergence barrier_exited shuffle_divergence own_bit_clear outside_mask; do
    for o in fwd warprev; do expect_ok "$c[$o]" "$S" $c CUDACPU_SCHEDULE=$o; done
  done
  expect_ok "barrier_exited_not_strict[fwd]" "$S" barrier_exited CUDACPU_STRICT_EXIT=0
  for o in $ORDERS; do
    for c in missing_syncthreads_twin barrier_twin collectives_twin race_one_order race_twin; do
      expect_ok "$c[$o]" "$S" $c CUDACPU_SCHEDULE=$o
    done
  done
  expect_ok "race_one_order[rand,seed=7]" "$S" race_one_order CUDACPU_SCHEDULE=rand CUDACPU_SEED=7
fi

# ------------------------------------------------------------ shared memory poison
if build shared_poison; then
  for c in unwritten_read_f32 unwritten_read_f64 written_twin inline_function half_types; do
    for p in 1 0; do expect_ok "$c[poison=$p]" "$B/shared_poison" $c CUDACPU_SHARED_POISON=$p; done
  done
  expect_ok "unwritten_read_f32[warprev]" "$B/shared_poison" unwritten_read_f32 CUDACPU_SCHEDULE=warprev
fi

# ------------------------------------------------------------ WMMA fragments (mma.h)
if build wmma; then
  for o in fwd warprev rand; do
    for c in products learned_rows_twin uniform_twin assumed_layout nonuniform_write misaligned half_warp partial_warp; do
      expect_ok "wmma_$c[$o]" "$B/wmma" $c CUDACPU_SCHEDULE=$o
    done
  done
  for seed in 2 3; do expect_ok "wmma_assumed_layout[seed=$seed]" "$B/wmma" assumed_layout CUDACPU_SEED=$seed; done
  for m in sync deferred; do expect_ok "launch_log[$m]" "$B/wmma" launch_log CUDACPU_STREAMS=$m; done
fi
if build wmma asan; then
  for c in products learned_rows_twin nonuniform_write; do expect_ok "wmma_$c[asan]" "$B/wmma.asan" $c; done
fi

# ------------------------------------------------------------ ASan
if build memcheck asan; then
  expect_exit "out_of_bounds_write[asan]" 1 "heap-buffer-overflow.*|in fill_kernel" "$B/memcheck.asan" out_of_bounds_write
  if grep -a -q 'in fill_kernel' "$B/out_of_bounds_write[asan].log" 2>/dev/null; then pass "out_of_bounds_write_names_kernel[asan]"
  else fail "out_of_bounds_write_names_kernel[asan]" "the report does not name fill_kernel"; fi
  expect_ok "in_bounds_twin[asan]" "$B/memcheck.asan" in_bounds_twin
  expect_ok "in_bounds_twin[asan,warprev]" "$B/memcheck.asan" in_bounds_twin CUDACPU_SCHEDULE=warprev
fi
if build sync_checks asan; then
  for c in barrier_deadlock shuffle_divergence collectives_twin barrier_twin; do
    expect_ok "$c[asan]" "$B/sync_checks.asan" $c
  done
fi

# ------------------------------------------------------------ streams
if build streams; then
  for c in missing_wait missing_wait_twin pinned_rewrite pinned_rewrite_twin pinned_download legacy_stream \
    launch_error_at_sync event_query launch_outlives_caller host_threads; do
    for m in deferred sync; do expect_ok "$c[$m]" "$B/streams" $c CUDACPU_STREAMS=$m; done
  done
fi
if build streams asan; then
  for c in launch_outlives_caller host_threads missing_wait_twin; do
    expect_ok "$c[asan,deferred]" "$B/streams.asan" $c CUDACPU_STREAMS=deferred
  done
fi

# ------------------------------------------------------------ cuBLASLt products in stream order
# linked with the stand-in cuBLASLt, the runtime's symbols exported (the library queues its
# products through them), as the project's programs are
exe="$B/cublaslt_streams"; log="$exe.build.log"
if "$NVCC" -O2 -std=c++17 -Xcompiler -Wall,-Wextra,-Werror -c "$HERE/cublaslt_streams.cu" -o "$exe.o" >"$log" 2>&1 &&
  g++ -o "$exe" "$exe.o" -Wl,--export-dynamic "$OUT/lib64/libcudart_static.a" -L"$OUT/lib64" -Wl,-rpath,"$OUT/lib64" \
    -lcublasLt -lpthread >>"$log" 2>&1; then
  for m in deferred sync; do
    for c in in_stream_order missing_wait missing_wait_twin; do expect_ok "cublaslt_$c[$m]" "$exe" $c CUDACPU_STREAMS=$m; done
  done
else
  fail build_cublaslt_streams "$(grep -m1 -E 'error|undefined' "$log")"
fi

# ------------------------------------------------------------ NCCL between processes
# nccl forks one process per rank (devices 0.. of CUDACPU_DEVICES=4); linked as the project's
# programs are (the runtime's symbols exported, for the stand-in's cudaLaunchHostFunc)
exe="$B/nccl"; log="$exe.build.log"
if "$NVCC" -O2 -std=c++17 -Xcompiler -Wall,-Wextra,-Werror -c "$HERE/nccl.cu" -o "$exe.o" >"$log" 2>&1 &&
  g++ -o "$exe" "$exe.o" -Wl,--export-dynamic "$OUT/lib64/libcudart_static.a" -L"$OUT/lib64" -Wl,-rpath,"$OUT/lib64" \
    -lnccl -lpthread >>"$log" 2>&1; then
  for m in deferred sync; do
    for c in values rank_order group_chunks stream_order missing_wait_twin destroy_flushes peer_exit peer_abort \
      abort_unblocks mismatch init_checks call_checks; do
      expect_ok "nccl_$c[$m]" "$exe" $c CUDACPU_STREAMS=$m CUDACPU_DEVICES=4 CUDACPU_NCCL_TIMEOUT=30
    done
    for c in timeout init_missing_rank; do
      expect_ok "nccl_$c[$m]" "$exe" $c CUDACPU_STREAMS=$m CUDACPU_DEVICES=4 CUDACPU_NCCL_TIMEOUT=1
    done
  done
  expect_ok "nccl_missing_wait[deferred]" "$exe" missing_wait CUDACPU_STREAMS=deferred CUDACPU_DEVICES=4
  expect_exit "bad_nccl_timeout" 2 "CUDACPU_NCCL_TIMEOUT=soon is not valid" "$exe" call_checks CUDACPU_NCCL_TIMEOUT=soon
else
  fail build_nccl "$(grep -m1 -E 'error|undefined' "$log")"
fi

# ------------------------------------------------------------ counters, settings
if build counters; then
  for m in deferred sync; do
    expect_ok "exact_counts[$m]" "$B/counters" exact_counts CUDACPU_STREAMS=$m
    expect_ok "counts_reset[$m]" "$B/counters" reset CUDACPU_STREAMS=$m
  done
  expect_exit "stats_summary" 0 "cudacpu: 1 kernels, 1 blocks, 64 threads, 1 barriers, 2 warp collectives" \
    "$B/counters" reset CUDACPU_STATS=1
  expect_exit "stats_names" 0 "cudacpu: ran sum_kernel" "$B/counters" reset CUDACPU_STATS=2
  expect_exit "unknown_schedule" 2 "CUDACPU_SCHEDULE=bogus is not valid" "$B/counters" reset CUDACPU_SCHEDULE=bogus
  expect_exit "unknown_stream_mode" 2 "CUDACPU_STREAMS=later is not valid" "$B/counters" reset CUDACPU_STREAMS=later
  expect_exit "bad_poison_setting" 2 "CUDACPU_SHARED_POISON=2 is not valid" "$B/counters" reset CUDACPU_SHARED_POISON=2
  expect_exit "bad_seed" 2 "CUDACPU_SEED=x1 is not valid" "$B/counters" reset CUDACPU_SEED=x1
fi
if pkg-config --exists luajit 2>/dev/null; then
  if gcc -std=c11 -Wall -Wextra -Werror -O2 -I"$OUT/include" $(pkg-config --cflags luajit) -o "$B/counters_ffi" \
    "$HERE/counters_ffi.c" -Wl,--export-dynamic "$OUT/lib64/libcudart_static.a" $(pkg-config --libs luajit) \
    -lstdc++ -lpthread -ldl -lm >"$B/counters_ffi.build.log" 2>&1; then
    log="$B/counters_ffi.log"
    if "$B/counters_ffi" "$OUT/include/cuda_runtime.h" >"$log" 2>&1; then pass counters_from_luajit_ffi
    else fail counters_from_luajit_ffi "$(last_words "$log")"; fi
  else
    fail counters_from_luajit_ffi "build: $(grep -m1 -E 'error|undefined' "$B/counters_ffi.build.log")"
  fi
else
  skip counters_from_luajit_ffi "no luajit (pkg-config)"
fi

# ------------------------------------------------------------ the card and driver pretended
if build cards; then
  for a in 75 80 90 120; do expect_ok "card_props[sm_$a]" "$B/cards" props CUDACPU_ARCH=$a; done
  expect_ok "card_arch_macro" "$B/cards" arch_macro
  expect_ok "card_launch_on_newer[sm_120]" "$B/cards" launch CUDACPU_ARCH=120
  expect_ok "card_no_image_on_older[sm_75]" "$B/cards" no_image CUDACPU_ARCH=75
  expect_exit "card_no_image_said" 0 "compiled for sm_90 .* launched on an sm_75 device" "$B/cards" no_image CUDACPU_ARCH=75
  expect_ok "card_trap" "$B/cards" trap
  expect_ok "card_driver_too_old" "$B/cards" driver CUDACPU_DRIVER=12040
  expect_exit "card_bad_arch_setting" 2 "CUDACPU_ARCH=91 is not valid" "$B/cards" props CUDACPU_ARCH=91
fi
# bf16 WMMA fragments compile for sm_80 and not for sm_75 (f16 ones for both)
frag() { CUDACPU_ARCH=$1 "$NVCC" -O1 -std=c++17 $2 -c "$HERE/bf16_fragment.cu" -o "$B/frag.o" >"$B/frag.log" 2>&1; }
if frag 75 -DWITH_BF16; then fail card_bf16_fragment_sm75 "a bf16 fragment compiled for sm_75"
elif ! frag 75 ""; then fail card_bf16_fragment_sm75 "f16 fragments did not compile for sm_75: $(grep -m1 error "$B/frag.log")"
elif ! frag 80 -DWITH_BF16; then fail card_bf16_fragment_sm75 "bf16 did not compile for sm_80: $(grep -m1 error "$B/frag.log")"
else pass card_bf16_fragment_sm75; fi

# ------------------------------------------------------------ the rewrite keeps line numbers
bad=""
for f in "$HERE"/*.cu; do
  [ "$(wc -l <"$f")" = "$(perl "$HERE/../cu2cpp.pl" <"$f" | wc -l)" ] || bad="$bad $(basename "$f")"
done
if [ -z "$bad" ]; then pass cu2cpp_keeps_lines; else fail cu2cpp_keeps_lines "line count changed in$bad"; fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
