#!/usr/bin/env bash
# tests/cudacpu/dist_nccl.sh — core/dist's NCCL path (dist_nccl.c) with 2 ranks on emulated
# CUDA (mpirun -np 2, CUDACPU_DEVICES=2, the emulator's NCCL stand-in), through
# tests/cudacpu/dist_nccl_ranks.lua (TRAINER, default build/cudacpu/trainer):
#   dist_nccl_mean          three gradients in 8 KiB buckets, two last written by a fill kernel
#                           on the compute stream: the mean over the ranks, bitwise, on both
#                           ranks, at once (2 buckets) and overlapped (1 bucket issued at the
#                           ready call). Under CUDACPU_STREAMS=deferred (the suite's) an NCCL
#                           stream that does not wait for the compute stream's event reduces
#                           the uploaded values instead, and this fails;
#   dist_nccl_peer_hangs    rank 1 stops answering before its all-reduce: rank 0's fails within
#                           CUDACPU_NCCL_TIMEOUT (2 s) with NCCL's asynchronous error naming
#                           rank 1, and does not return NaN gradients as an all-reduce done;
#   dist_nccl_after_abort   a second all-reduce on either rank says that the communicator was
#                           aborted, and the job ends (no hang, no crash).
# SKIP without mpirun or in a build without MPI or NCCL.
set -u
cd "$(dirname "$0")/../.." || exit 1
TRAINER=${TRAINER:-build/cudacpu/trainer}
W="${OUT:-build/cudacpu_out}/dist_nccl"
passed=0; failed=0
pass() { echo "PASS $1${2:+ ($2)}"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [ "$failed" = 0 ]; exit; }
NAMES="dist_nccl_mean dist_nccl_peer_hangs dist_nccl_after_abort"
why=""
if ! command -v mpirun >/dev/null 2>&1; then why="mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)"
elif [ ! -x "$TRAINER" ]; then why="no $TRAINER (make cudacpu builds it)"
else
  have=$("$TRAINER" run <(echo 'local C = require("trainer.core.ffi") io.write(C.tr_dist_have_mpi(), C.tr_dist_have_nccl())') 2>/dev/null)
  [ "$have" = 11 ] || why="this build has no MPI or no NCCL (tr_dist_have_mpi, tr_dist_have_nccl: $have)"
fi
if [ -n "$why" ]; then
  for n in $NAMES; do echo "SKIP $n: $why"; done
  finish
fi
rm -rf "$W"; mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export CUDACPU_DEVICES=2 CUDACPU_NCCL_TIMEOUT=2
run_case() { # CASE: the ranks' output in $W/CASE.log, status in $?
  timeout 60 mpirun -np 2 --oversubscribe "$TRAINER" run tests/cudacpu/dist_nccl_ranks.lua "$1" >"$W/$1.log" 2>&1 </dev/null
}

run_case values; rc=$?
log="$W/values.log"
if [ $rc = 0 ] && [ "$(grep -c -E '^rank [01]: ok (at once|overlapped)$' "$log")" = 4 ] &&
  [ "$(grep -c -E '^rank [01]: ok buckets 2$' "$log")" = 2 ] &&
  [ "$(grep -c -E '^rank [01]: ok overlapped buckets 1$' "$log")" = 2 ]; then
  pass dist_nccl_mean "both ranks, at once and overlapped"
else
  fail dist_nccl_mean "exit $rc: $(grep -v '^rank [01]: ok' "$log" | head -n 3 | tr '\n' ' ')"
fi

start=$(date +%s)
run_case hang; rc=$?
took=$(($(date +%s) - start))
log="$W/hang.log"
if grep -q '^rank 0: error distributed: the NCCL all-reduce of the gradients failed on rank 0 of 2: .*rank 1 did not reach' "$log" &&
  ! grep -q '^rank 0: ok done' "$log"; then
  pass dist_nccl_peer_hangs "$(grep -o 'rank 1 did not reach collective [0-9]*' "$log" | head -n 1)"
else
  fail dist_nccl_peer_hangs "$(grep '^rank 0:' "$log" | head -n 2 | tr '\n' ' ')"
fi
if [ "$(grep -c '^rank [01]: error again distributed (NCCL): the communicator was aborted' "$log")" = 2 ] &&
  [ $rc != 124 ] && [ $took -lt 30 ]; then
  pass dist_nccl_after_abort "the job ended after ${took} s"
else
  fail dist_nccl_after_abort "exit $rc after ${took} s: $(grep 'again' "$log" | tr '\n' ' ')"
fi
finish
