#!/usr/bin/env bash
# tests/cudacpu/train_nccl.sh — data-parallel training on emulated CUDA with 2 ranks (mpirun
# -np 2, CUDACPU_DEVICES=2: cuda:0 and cuda:1), the gradients all-reduced by NCCL (the
# emulator's stand-in, tools/cudacpu/src/nccl_*.c: the ranks' data through shared memory, on
# the NCCL stream in stream order) against the same recipe with distributed.backend = "mpi"
# (the gradients staged through host memory, MPI_Iallreduce). The classifier of
# train_fixture.lua, cross_entropy, AdamW, dropout 0.1, 6 steps of 2 x 4 rows, 16 KiB buckets
# (several NCCL groups a step, issued while backward runs).
#   nccl_equals_mpi[deferred]  every step's loss and clip norm bitwise equal: with 2 ranks
#                              both means are exact in the same way (NCCL's ncclAvg multiplies
#                              each rank's value by 0.5, MPI halves the sum: the same bits),
#                              and every rank reduces in rank order;
#   nccl_equals_mpi[sync]      the same with CUDACPU_STREAMS=sync (each collective at its call);
#   nccl_in_summary            summary.json says backend nccl, several buckets a step, some
#                              issued while backward ran;
#   auto_falls_back_together   backend "auto" where rank 1 cannot load libnccl (LD_LIBRARY_PATH
#                              to an unloadable one): every rank falls back to MPI and the run
#                              trains as the MPI run, bitwise (rank 0 alone on NCCL would wait
#                              for an id rank 1 never sends);
#   nccl_refused_together      backend "nccl" there: both ranks stop at once, rank 0 saying
#                              that loading failed on 1 of 2 ranks, rank 1 why.
# SKIP without mpirun or in a build without MPI or NCCL.
set -u
. "$(dirname "$0")/train_lib.sh"
names "nccl_equals_mpi[deferred] nccl_equals_mpi[sync] nccl_in_summary auto_falls_back_together nccl_refused_together"
need_cuda
have=$("$TRAINER" run <(echo 'local C = require("trainer.core.ffi") io.write(C.tr_dist_have_mpi(), C.tr_dist_have_nccl())') 2>/dev/null)
why=""
command -v mpirun >/dev/null 2>&1 || why="mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)"
[ -z "$why" ] && [ "$have" != 11 ] && why="this build has no MPI or no NCCL (tr_dist_have_mpi, tr_dist_have_nccl: $have)"
if [ -n "$why" ]; then
  for n in $NAMES; do skip "$n" "$why"; done
  finish
fi
fixture

# CI runs as root; one thread per rank (2 ranks share the cores)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export CUDACPU_DEVICES=2
R=("$FX/nli.lua" device=cuda distributed.bucket=16KiB distributed.timeout=60 log.every=1)
# ranks NAME MODE [RANK1_ENV] ARGS...: mpirun -np 2 with CUDACPU_STREAMS=MODE, rank 1 under
# `env RANK1_ENV` (one VAR=VALUE, or "-" for none); its output in NAME.log, its status in $?
ranks() {
  local n=$1 mode=$2 r1=$3; shift 3
  local cmd=("$TRAINER" "${R[@]}" "$@" out="$W/runs/$n" --quiet)
  [ "$r1" = - ] && r1="CUDACPU_STREAMS=$mode"
  timeout 120 mpirun --oversubscribe -np 1 env CUDACPU_STREAMS="$mode" "${cmd[@]}" : \
    -np 1 env CUDACPU_STREAMS="$mode" "$r1" "${cmd[@]}" >"$W/runs/$n.log" 2>&1 </dev/null
}

ranks mpi deferred - distributed.backend=mpi; m=$?
ranks nccl deferred - distributed.backend=nccl; a=$?
judge "nccl_equals_mpi[deferred]" nccl $a mpi $m "loss:0,grad_norm:0,lr:0,tokens:0" "2 ranks"
ranks nccl_sync sync - distributed.backend=nccl; b=$?
judge "nccl_equals_mpi[sync]" nccl_sync $b mpi $m "loss:0,grad_norm:0,lr:0,tokens:0" "2 ranks"

cat >"$W/summary.lua" <<'EOF'
local json = require("trainer.core.json")
local d = json.read(arg[1] .. "/summary.json").distributed
io.write(("%s %d %d %d"):format(d.backend, d.buckets, d.buckets_overlapped, d.allreduce_calls))
EOF
s=$("$TRAINER" run "$W/summary.lua" "$W/runs/nccl" 2>&1)
read -r backend buckets overlapped calls <<<"$s"
if [ $a = 0 ] && [ "$backend" = nccl ] && [ "${buckets:-0}" -gt "${calls:-0}" ] && [ "${overlapped:-0}" -gt 0 ]; then
  pass nccl_in_summary "$buckets buckets in $calls all-reduces, $overlapped issued while backward ran"
else
  fail nccl_in_summary "backend, buckets, overlapped, all-reduces: $s"
fi

# an unloadable libnccl.so.2 and libnccl.so first on rank 1's library path
mkdir -p "$W/broken_nccl"
: >"$W/broken_nccl/libnccl.so.2"
: >"$W/broken_nccl/libnccl.so"
ranks auto deferred LD_LIBRARY_PATH="$W/broken_nccl" distributed.backend=auto distributed.timeout=30; c=$?
s=$("$TRAINER" run "$W/summary.lua" "$W/runs/auto" 2>&1)
if [ $c = 0 ] && [ "${s%% *}" != mpi ]; then
  fail auto_falls_back_together "the run chose $s"
else
  judge auto_falls_back_together auto $c mpi $m "loss:0,grad_norm:0" "rank 1 without libnccl: every rank on MPI"
fi

start=$(date +%s)
ranks refused deferred LD_LIBRARY_PATH="$W/broken_nccl" distributed.backend=nccl distributed.timeout=30; c=$?
took=$(($(date +%s) - start))
log="$W/runs/refused.log"
if [ $c != 0 ] && [ $took -lt 25 ] && grep -q "loading libnccl failed on 1 of 2 ranks" "$log" &&
  grep -q "cannot load libnccl.so.2" "$log"; then
  pass nccl_refused_together "exit $c after ${took} s"
else
  fail nccl_refused_together "exit $c after ${took} s: $(grep -m2 'trainer:' "$log" | tr '\n' ' ')"
fi
finish
