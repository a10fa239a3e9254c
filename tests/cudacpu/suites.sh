#!/usr/bin/env bash
# tests/cudacpu/suites.sh — the suites of the CUDA-on-CPU stage (make cudacpu), one line each:
#   NAME<TAB>COMMAND
# tests/run.sh runs them beside the CPU suites and counts their PASS/FAIL/SKIP lines in the one
# total. What they cover:
#   - the emulator's own tests (tools/cudacpu/tests: each kind of bug it claims to catch has a
#     broken kernel it must flag; the cuBLASLt stand-in against a double reference and its
#     documented refusals);
#   - every GPU test program (tests/gpu/test_*.c, tests/c/test_ops_table.c --cuda) and the Lua
#     device test under two schedule orders: fwd with streams run at once, and warprev (one
#     warp runs ahead to the next barrier) with streams deferred (CUDACPU_STREAMS=deferred:
#     a stream's work runs only when a sync, an event wait or a copy to the host forces it, so
#     a missing stream wait reads stale data). A result that changes with the order is a race;
#   - the same programs under ASan + UBSan (kernels, runtime and core sanitized), streams
#     deferred, with the caching allocator off (TRAINER_NO_MEMORY_CACHING=1: every tensor its
#     own allocation, so an overrun past a tensor's end is an ASan report, not a write into a
#     neighbour);
#   - the op table's CUDA cases at a second card setting, sm_75 (tests/cudacpu/train_cards.sh
#     trains there);
#   - the op table's CUDA cases and the feed-forward's GELU with the cuBLASLt stand-in
#     withholding the fused epilogues (CUDACPU_LT_EPILOGUES), so the unfused paths run;
#   - tests/cudacpu's test scripts (*.sh but this file and the *_lib.sh they source; test_*.lua
#     and host_syncs.lua): whole training runs on emulated CUDA against the CPU, streams
#     deferred (the batch feed's copy stream against the compute stream). Its other Lua files
#     are the scripts' helpers (fixture, comparators, a runner).
set -u
cd "$(dirname "$0")/../.."
E=build/cudacpu
tab=$'\t'
echo "cudacpu self-tests${tab}make -s --no-print-directory -C tools/cudacpu OUT=$PWD/$E/home test"
echo "cudacpu cuBLASLt${tab}bash tools/cudacpu/tests/run_cublaslt.sh $E/home"
args_of() { [ "$(basename "$1")" = test_ops_table ] && echo --cuda; }
for mode in "fwd sync" "warprev deferred"; do
  set -- $mode
  env="env CUDACPU_SCHEDULE=$1 CUDACPU_STREAMS=$2"
  for bin in "$E"/rel/gpu-tests/test_*; do
    echo "$(basename "$bin") [cudacpu $1]${tab}$env $bin $(args_of "$bin")"
  done
  echo "test_device_lua [cudacpu $1]${tab}$env $E/trainer run tests/gpu/test_device_lua.lua"
done
# the op table on an sm_75 card (build/cudacpu-sm75: the kernels compiled for it, the device
# reporting compute capability 7.5): f16 on the f16 tensor cores, every bf16 call declined
echo "test_ops_table [cudacpu sm_75]${tab}env CUDACPU_ARCH=75 CUDACPU_SCHEDULE=warprev CUDACPU_STREAMS=deferred build/cudacpu-sm75/rel/gpu-tests/test_ops_table --cuda"
# a cuBLASLt without the fused epilogues (the stand-in withholds them: CUDACPU_LT_EPILOGUES):
# every op falls back to its unfused path and still matches the CPU
echo "test_ops_table [cudacpu no epilogues]${tab}env CUDACPU_LT_EPILOGUES=none CUDACPU_SCHEDULE=fwd $E/rel/gpu-tests/test_ops_table --cuda"
echo "test_linear_gelu [cudacpu bias epilogue only]${tab}env CUDACPU_LT_EPILOGUES=bias CUDACPU_STREAMS=deferred $E/trainer run tests/cudacpu/test_linear_gelu.lua"
for bin in "$E"/asan/gpu-tests/test_*; do
  echo "$(basename "$bin") [cudacpu asan]${tab}env CUDACPU_SCHEDULE=fwd CUDACPU_STREAMS=deferred TRAINER_NO_MEMORY_CACHING=1 $bin $(args_of "$bin")"
done
for t in tests/cudacpu/*.sh tests/cudacpu/test_*.lua tests/cudacpu/host_syncs.lua; do
  [ -e "$t" ] || continue
  case "$t" in */suites.sh | *_lib.sh) continue ;; esac
  n=$(basename "$t")
  case "$t" in
    *.sh) echo "${n%.sh} [cudacpu]${tab}env CUDACPU_STREAMS=deferred TRAINER=$E/trainer bash $t" ;;
    *.lua) echo "${n%.lua} [cudacpu]${tab}env CUDACPU_STREAMS=deferred $E/trainer run $t" ;;
  esac
done
