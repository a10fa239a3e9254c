#!/usr/bin/env bash
# bench/gpu/run.sh — trainer against transformers + peft on the same card, side by side.
# Writes one random BERT (bench/gpu/trainer_side.lua --write: safetensors with
# Hugging Face names, and one fixed batch of token ids) that both sides load, then trains it
# for a few steps with each side, one process per measurement, for
#   fp32 full, bf16 full, bf16 + checkpointing, bf16 + checkpointing + LoRA (the flagship)
# at 16 x 512 (8 pairs) and 48 x 512 (the flagship recipe's 16 triplets), MNRL, AdamW, dropout
# 0.1, and prints a table: tokens/s, MFU, peak allocated and reserved (ours from the ledger,
# PyTorch's from torch.cuda.max_memory_allocated/reserved), the nvidia-smi peak of each
# process, and the ratios trainer / PyTorch. Fits in 5 minutes on an H200 (BERT-large).
#
#   bash bench/gpu/run.sh                      # on a GPU machine with torch, transformers, peft
#   bash bench/gpu/run.sh --device cpu --tiny  # smoke mode: the tiny shape on the CPU
# Flags: --device cuda|cpu, --tiny, --warmup N (2), --steps N (3), --out DIR (build/bench_gpu),
# --budget SECONDS (290: measurements that would start later are reported as not run),
# --only CONFIG. Env: TRAINER (./trainer), PYTHON (python3), PEAK_BF16, PEAK_FP32 (the card's
# dense peaks for MFU; default the H200 SXM's, 989e12 and 67e12 FLOP/s; fp32 runs without TF32
# on both sides). PyTorch's columns are "-" when torch, transformers or peft do not import;
# nvidia-smi's when it is absent. Output: the table on stdout and $OUT/bench_gpu.txt, each
# process's line in $OUT/raw.txt. Never a test of speed; tests/cli/test_bench_gpu.sh runs the
# smoke mode for the trainer side's plumbing.
set -u
cd "$(dirname "$0")/../.." || exit 1
device=cuda; tiny=0; warmup=2; steps=3; out=build/bench_gpu; budget=290; only=""
while [ $# -gt 0 ]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --tiny) tiny=1; shift ;;
    --warmup) warmup=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "bench/gpu/run.sh: unknown flag $1 (see the top of the file)" >&2; exit 1 ;;
  esac
done
TRAINER=${TRAINER:-./trainer}
PYTHON=${PYTHON:-python3}
PEAK_BF16=${PEAK_BF16:-989e12}
PEAK_FP32=${PEAK_FP32:-67e12}
mkdir -p "$out" || exit 1
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
raw="$out/raw.txt"; : >"$raw"

if [ "$tiny" = 1 ]; then shape=tiny; seq=32; else shape=large; seq=512; fi
weights="$out/weights_$shape"
if [ ! -f "$weights/model.safetensors" ] || [ ! -f "$weights/batch.safetensors" ]; then
  "$TRAINER" run bench/gpu/trainer_side.lua --write "$weights" --shape "$shape" --seq "$seq" >>"$raw" 2>&1 ||
    { echo "bench/gpu: writing the weights failed:"; tail -5 "$raw"; exit 1; }
fi
have_torch=0
if "$PYTHON" -c "import torch, transformers, peft, safetensors" >/dev/null 2>&1; then have_torch=1; fi
have_smi=0
if [ "$device" != cpu ] && command -v nvidia-smi >/dev/null 2>&1; then have_smi=1; fi

# the shape, for MFU: model FLOPs per token = 6 x (the layers' matmul parameters) + 12 L T H
# (attention's two T x T products, forward and backward); recomputation is not counted
cfgv() { grep -o "\"$1\": *[0-9]*" "$weights/config.json" | grep -o '[0-9]*$'; }
H=$(cfgv hidden_size); L=$(cfgv num_hidden_layers); I=$(cfgv intermediate_size)
flops_per_token=$(awk -v H="$H" -v L="$L" -v I="$I" -v T="$seq" 'BEGIN { printf "%.6g", 6 * L * (4 * H * H + 2 * H * I) + 12 * L * T * H }')

get() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -1; }

# runs one measurement: side (trainer|torch), config, rows; prints its result line (or "")
measure() {
  local side=$1 config=$2 rows=$3 smi_file="$out/smi.$$" smi_pid="" line rc
  if [ "$have_smi" = 1 ]; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 50 >"$smi_file" 2>/dev/null &
    smi_pid=$!
  fi
  if [ "$side" = trainer ]; then
    line=$(timeout 120 "$TRAINER" run bench/gpu/trainer_side.lua --train "$weights" --config "$config" --rows "$rows" \
      --device "$device" --warmup "$warmup" --steps "$steps" 2>>"$raw")
  else
    line=$(timeout 120 "$PYTHON" bench/gpu/torch_side.py --train "$weights" --config "$config" --rows "$rows" \
      --device "$device" --warmup "$warmup" --steps "$steps" 2>>"$raw")
  fi
  rc=$?
  if [ -n "$smi_pid" ]; then
    kill "$smi_pid" 2>/dev/null; wait "$smi_pid" 2>/dev/null
    line="$line smi_peak_mib=$(sort -n "$smi_file" | tail -1)"
    rm -f "$smi_file"
  fi
  echo "$side $config $rows rc=$rc $line" >>"$raw"
  [ "$rc" = 0 ] && echo "$line"
}

mib() { [ -n "$1" ] && awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }' || echo "-"; }
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }' || echo "-"; }
mfu() { # tokens/s, config
  [ -n "$1" ] || { echo "-"; return; }
  local peak=$PEAK_FP32
  case $2 in bf16*) peak=$PEAK_BF16 ;; esac
  awk -v t="$1" -v f="$flops_per_token" -v p="$peak" 'BEGIN { printf "%.1f%%", 100 * t * f / p }'
}
or_dash() { [ -n "$1" ] && echo "$1" || echo "-"; }

table="$out/bench_gpu.txt"
{
  echo "bench/gpu/run.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), device $device, shape $shape ($L layers, hidden $H), seq $seq"
  if [ "$have_smi" = 1 ]; then nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1; fi
  if [ "$have_torch" = 1 ]; then
    "$PYTHON" -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" 2>&1
  else
    echo "PyTorch side: not run (torch, transformers or peft does not import with $PYTHON)"
  fi
  echo "$warmup warm-up + $steps measured steps per process; MNRL, AdamW lr 1e-5, dropout 0.1; MFU against ${PEAK_BF16} (bf16) / ${PEAK_FP32} (fp32) FLOP/s"
  echo
  printf '| %-15s | %4s | %10s | %10s | %6s | %6s | %6s | %8s | %8s | %6s | %8s | %8s | %6s | %8s | %8s | %s |\n' \
    config rows "tok/s ours" "tok/s PT" ratio "MFU" "MFU PT" "alloc" "alloc PT" ratio "resv" "resv PT" ratio "smi" "smi PT" "plan"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} | tee "$table"

# The flagship first (the recipe a GPU run is tuned for), at both shapes, then the rest: when the
# budget runs out it is the least important rows that say "not run".
for pair in bf16-ckpt-lora:16 bf16-ckpt-lora:48 bf16-ckpt:16 bf16-full:16 fp32-full:16 bf16-ckpt:48 bf16-full:48 \
            fp32-full:48; do
  config=${pair%:*} rows=${pair#*:}
  [ -n "$only" ] && [ "$only" != "$config" ] && continue
  if [ "$(elapsed)" -gt "$budget" ]; then
    printf '| %-15s | %4s | not run: past the %s s budget |\n' "$config" "$rows" "$budget" | tee -a "$table"
    continue
  fi
  ours=$(measure trainer "$config" "$rows")
  theirs=""
  if [ "$have_torch" = 1 ] && [ "$(elapsed)" -le "$budget" ]; then theirs=$(measure torch "$config" "$rows"); fi
  ot=$(get "$ours" tokens_s); tt=$(get "$theirs" tokens_s)
  oa=$(get "$ours" peak_allocated); ta=$(get "$theirs" peak_allocated)
  orr=$(get "$ours" peak_reserved); tr_=$(get "$theirs" peak_reserved)
  os=$(get "$ours" smi_peak_mib); ts=$(get "$theirs" smi_peak_mib)
  plan=$(get "$ours" plan_total)
  printf '| %-15s | %4s | %10s | %10s | %6s | %6s | %6s | %8s | %8s | %6s | %8s | %8s | %6s | %8s | %8s | %s |\n' \
    "$config" "$rows" "$(or_dash "$ot")" "$(or_dash "$tt")" "$(ratio "$ot" "$tt")" "$(mfu "$ot" "$config")" \
    "$(mfu "$tt" "$config")" "$(mib "$oa")" "$(mib "$ta")" "$(ratio "$oa" "$ta")" "$(mib "$orr")" "$(mib "$tr_")" \
    "$(ratio "$orr" "$tr_")" "$(or_dash "$os")" "$(or_dash "$ts")" "$(mib "$plan")" | tee -a "$table"
done
{
  echo
  echo "memory in MiB (2^20 B); alloc/resv: peak allocated/reserved of the measured steps; smi: nvidia-smi's peak"
  echo "memory.used of the card while the process ran (CUDA context included); plan: trainer plan's total for the"
  echo "same shape. A blank trainer cell: the run failed (its stderr is in $raw). Took $(elapsed) s."
} | tee -a "$table"
