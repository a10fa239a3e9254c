#!/usr/bin/env bash
# An op family has one name on every backend (docs/ARCHITECTURE.md, "Layers"): its kernels are
# kernels/cpu/NAME.c and kernels/cuda/NAME.cu, its op slots core/cpu_ops/NAME_cpu.c and
# core/cuda_ops/NAME_cuda.c, and its checks and wrappers core/ops/NAME.c. This test fails on a
# file of one side without its twin on the other, and on a core/ops family without a CPU slot
# file, unless the file is in ONE_SIDED below with the reason it has no twin. An entry whose
# file no longer exists fails too, so the list stays true.
#   tests/cli/test_family_pairs.sh [ROOT]   (default: the repository)
# Prints PASS/FAIL lines for tests/run.sh.
set -u
cd "${1:-$(dirname "$0")/../..}"

# file<TAB>why it has no twin of the same name
ONE_SIDED="\
kernels/cpu/attn_short.c	attention's path for short sequences on the CPU; on CUDA attention.cu covers every length
kernels/cpu/attn_tile.c	attention's register-blocked tile products for AVX-512 and AVX2; CUDA's tiles are in attention.cu and attention_tc.cu
kernels/cuda/attention_tc.cu	attention on the tensor cores (WMMA); the CPU's attention is attention.c
kernels/cuda/card.cu	the card's compute capability and a probe launch: the CPU has no card
kernels/cuda/index_check.cu	ids checked on the device without a read back; the CPU checks them where its slots read them
kernels/cuda/op_support.cu	the casts, uploads and column sums the CUDA slots share; the CPU's staging is core/ops/op_stage.c and core/cpu_ops/stage_rows.c
kernels/cuda/dropout_linear.cu	one pass that drops out and multiplies; the CPU slot runs dropout.c then matmul.c
kernels/cuda/loss_scale.cu	the loss scale updated on the device; the CPU slots are the eager scaler's arithmetic and tr_op_scale
kernels/cuda/multi_tensor.cu	the clip coefficient from a device norm; the CPU slots run each tensor's own op
core/cpu_ops/attention_packed_cpu.c	its CUDA slot is in attention_cuda.c, which shares the padded attention's staging with it
core/cpu_ops/stage_rows.c	the CPU slots' one loop that stages half operands to f32
core/cuda_ops/cuda_slot.c	what every CUDA slot shares (cuda_slot.h): staging, workspace, products
core/cuda_ops/weight_half.c	the kept bf16 copy of an f32 weight that CUDA's bf16 products read
core/ops/row_segments.c	gather, scatter and dropout over packed rows: wrappers over other families' slots"

pass=0; fail=0
ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }

one_sided() { printf '%s\n' "$ONE_SIDED" | cut -f1 | grep -qxF "$1"; }

# name<TAB>file, one line per family file of a side
cpu_kernels() { for f in kernels/cpu/*.c; do n=${f##*/}; printf '%s\t%s\n' "${n%.c}" "$f"; done; }
cuda_kernels() { for f in kernels/cuda/*.cu; do n=${f##*/}; printf '%s\t%s\n' "${n%.cu}" "$f"; done; }
# a slot file is NAME_cpu.c / NAME_cuda.c; the backends' own tables are cpu_backend.c / cuda_backend.c
cpu_slots() { for f in core/cpu_ops/*.c; do n=${f##*/}; n=${n%.c}; n=${n%_cpu}; printf '%s\t%s\n' "${n#cpu_}" "$f"; done; }
cuda_slots() { for f in core/cuda_ops/*.c; do n=${f##*/}; n=${n%.c}; n=${n%_cuda}; printf '%s\t%s\n' "${n#cuda_}" "$f"; done; }
# core/ops/NAME.c but the op table's own files (op_*.c)
op_families() { for f in core/ops/*.c; do n=${f##*/}; n=${n%.c}; case $n in op_*) continue ;; esac; printf '%s\t%s\n' "$n" "$f"; done; }

# check_side NAME LISTER-OF-THIS-SIDE LISTER-OF-THE-OTHER-SIDE WHERE-THE-TWIN-WOULD-BE
check_side() {
  local name=$1 these=$2 others=$3 where=$4 missing="" n f
  local names; names=$($others | cut -f1)
  while IFS=$'\t' read -r n f; do
    printf '%s\n' "$names" | grep -qxF "$n" && continue
    one_sided "$f" && continue
    missing="$missing $f"
  done < <($these)
  if [ -z "$missing" ]; then ok "$name"
  else bad "$name" "no twin named alike in $where for:$missing (rename one side, or add the file to ONE_SIDED in $0 with the reason)"; fi
}

check_side family_pairs.cpu_kernels_have_cuda cpu_kernels cuda_kernels kernels/cuda/
check_side family_pairs.cuda_kernels_have_cpu cuda_kernels cpu_kernels kernels/cpu/
check_side family_pairs.cpu_slots_have_cuda cpu_slots cuda_slots core/cuda_ops/
check_side family_pairs.cuda_slots_have_cpu cuda_slots cpu_slots core/cpu_ops/
check_side family_pairs.ops_have_cpu_slots op_families cpu_slots core/cpu_ops/

stale=""
while IFS=$'\t' read -r f why; do
  [ -e "$f" ] || stale="$stale $f"
  [ -n "$why" ] || stale="$stale $f(no reason)"
done <<<"$ONE_SIDED"
if [ -z "$stale" ]; then ok family_pairs.one_sided_list_is_current
else bad family_pairs.one_sided_list_is_current "ONE_SIDED names files that do not exist or gives no reason:$stale"; fi

[ "$fail" -eq 0 ]
