#!/usr/bin/env bash
# trainer against PyTorch (transformers + peft, sentence-transformers) on the CPU of this
# machine, in one run, alternating the two sides (A B A B: trainer, PyTorch, trainer, PyTorch)
# so that a change in the machine's load hits both. Every measurement is its own process, so
# its peak RSS (/usr/bin/time: the "Maximum resident set size" of -v) is its own. A
# benchmark: it measures and prints, it asserts nothing, and is never a test.
#
#   bench/vs_pytorch.sh --setup-only   make the virtual environment and stop
#   bench/vs_pytorch.sh --setup        make it, then run the benchmark
#   bench/vs_pytorch.sh [--quick]      run (the venv must exist)
#     --quick     all-MiniLM-L6-v2 shape only, fewer steps: a few minutes on 2 idle cores
#     --shapes=LIST the 32 x 128 shapes to run, of "minilm bert-base" (default: both; --quick: minilm)
#     --families=LIST the model families of the 32 x 128 rows, of "bert distilbert mpnet modernbert"
#                 (default: bert; bench/families.json gives each one's config fields and LoRA targets)
#     --configs=LIST the configurations of the 32 x 128 rows, of "fp32-full fp32-lora bf16-ckpt-lora
#                 bf16-lora" (default: the first three; PyTorch's bf16 rows are slow on CPUs without
#                 AVX512-BF16; bf16-lora: no checkpointing on either side; where transformers
#                 cannot checkpoint the family, MPNet, the PyTorch side of bf16-ckpt-lora wraps each
#                 encoder layer in torch.utils.checkpoint, bench/torch_train_step.py)
#     --train-only  only the 32 x 128 rows (no STS-B fine-tune, no encode)
#     --encode-only only the encode rows
#     ROUNDS=N    alternations A B per row (default 2): on a VM whose speed swings between runs,
#                 more rounds make the median ratio steadier
#     VENV=DIR    the virtual environment (default build/bench-venv; build/ is ignored by git)
#     THREADS=N   threads of both sides (default: nproc); OMP_NUM_THREADS and torch.set_num_threads
#     TRAINER=BIN the trainer binary (default ./trainer)
#     ISA=avx2    both sides stop at AVX2 + FMA on an AVX-512 machine, to measure what an AVX2-only
#                 CPU runs: TRAINER must be a binary built with `make ISA_MAX=avx2 CUDA=0
#                 BUILD=build/avx2 TRAINER_BIN=build/avx2/trainer` (its kernels, attention
#                 tiles, Philox, OpenBLAS and oneDNN stay at AVX2); PyTorch gets
#                 ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2, MKL_ENABLE_INSTRUCTIONS=AVX2.
#                 The cores' clocks and caches stay this machine's: a stand-in, not an AVX2 CPU
#
# Rows:
#   32 x 128 random token ids a step, AdamW, random init, 2-label classifier, cross entropy, for
#   each family of --families
#   the all-MiniLM-L6-v2 shape (6 layers x 384, 12 heads, 1536) and the BERT-base shape
#   (12 x 768, 12 heads, 3072), in three configurations: fp32 full; fp32 LoRA r 8 on query and
#   value; bf16 + checkpointing of every layer + LoRA (bench/train_step.lua against
#   bench/torch_train_step.py: tokens/s over the measured steps after one warm-up step).
#   STS-B fine-tune: recipes/minilm_sts_lora.lua (LoRA, CoSENT, batch 16, max_length 64) against
#   SentenceTransformerTrainer with the same model folder, loss, batch, lr and steps
#   (bench/st_compare.py finetune): samples (pairs)/s over steps 2..N.
#   encode: 1000 SICK test premises (../shared/data) with the model folder, batch 32: in-process
#   (load and one untimed warm-up batch excluded on both sides: bench/encode_throughput.lua
#   against model.encode) and whole-process
#   (`trainer encode` against a Python process that loads sentence-transformers and encodes).
# Figures of the rounds: throughput is their mean, the ratio column the range of the per-round
# ratios and their median, peak RSS the largest. Ratios are trainer / PyTorch.
#
# Setup: PyPI's `torch` for Linux x86-64 is the CUDA build (about 3.5 GB to download with its
# nvidia-* wheels, 6 GB installed); it runs on the CPU, and PyPI has no CPU-only wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-build/bench-venv}
THREADS=${THREADS:-$(nproc)}
ROUNDS=${ROUNDS:-2}
case "$ROUNDS" in ''|*[!0-9]*|0) echo "bench/vs_pytorch.sh: ROUNDS must be a whole number from 1, got '$ROUNDS'" >&2; exit 1 ;; esac
MODEL=models/all-MiniLM-L6-v2
quick=0 setup=0 run=1 shapes_opt="" train_only=0 encode_only=0 families="bert"
configs="fp32-full fp32-lora bf16-ckpt-lora"
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    --setup) setup=1 ;;
    --setup-only) setup=1; run=0 ;;
    --shapes=*) shapes_opt=${a#--shapes=}
      for s in $shapes_opt; do case "$s" in minilm|bert-base) ;; *) echo "bench/vs_pytorch.sh: --shapes: unknown shape $s (shapes: minilm, bert-base)" >&2; exit 1 ;; esac; done ;;
    --families=*) families=${a#--families=}
      for f in $families; do case "$f" in bert|distilbert|mpnet|modernbert) ;; *) echo "bench/vs_pytorch.sh: --families: unknown family $f (families: bert, distilbert, mpnet, modernbert)" >&2; exit 1 ;; esac; done ;;
    --configs=*) configs=${a#--configs=}
      for c in $configs; do case "$c" in fp32-full|fp32-lora|bf16-ckpt-lora|bf16-lora) ;; *) echo "bench/vs_pytorch.sh: --configs: unknown configuration $c (configurations: fp32-full, fp32-lora, bf16-ckpt-lora, bf16-lora)" >&2; exit 1 ;; esac; done ;;
    --train-only) train_only=1 ;;
    --encode-only) encode_only=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/vs_pytorch.sh: unknown option $a (options: --setup, --setup-only, --quick, --shapes=LIST, --families=LIST, --configs=LIST, --train-only, --encode-only, --help)" >&2; exit 1 ;;
  esac
done

if [ "$setup" = 1 ]; then
  if [ ! -x /usr/bin/time ]; then
    if [ "$(id -u)" = 0 ]; then apt-get install -y time >/dev/null
    else echo "bench/vs_pytorch.sh: /usr/bin/time is missing: install Debian's package 'time' (apt-get install time)" >&2; exit 1; fi
  fi
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  # sentence-transformers[train] brings datasets and accelerate, which its trainer needs
  "$VENV/bin/pip" install --quiet torch transformers peft "sentence-transformers[train]"
  echo "bench venv ready: $VENV ($("$VENV/bin/python" -c 'import torch, transformers, peft, sentence_transformers as s; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__, "sentence-transformers", s.__version__)' 2>/dev/null))"
fi
[ "$run" = 1 ] || exit 0

PY="$VENV/bin/python"
if ! "$PY" -c 'import torch, transformers, peft, sentence_transformers, datasets' 2>/dev/null; then
  echo "bench/vs_pytorch.sh: no bench virtual environment with torch, transformers, peft and sentence-transformers at $VENV; make it with: bench/vs_pytorch.sh --setup-only" >&2
  exit 1
fi
[ -x /usr/bin/time ] || { echo "bench/vs_pytorch.sh: /usr/bin/time is missing: apt-get install time" >&2; exit 1; }
TRAINER=${TRAINER:-./trainer}
[ -x "$TRAINER" ] || { echo "bench/vs_pytorch.sh: $TRAINER is not built: run make -j2 first" >&2; exit 1; }
export TRAINER_ROOT="$PWD"   # the Lua and recipes of this checkout, wherever the binary is
ISA=${ISA:-}
case "$ISA" in
  '') ;;
  avx2)
    probe=$(mktemp --suffix=.lua)
    echo 'print(require("trainer.core.ops").cpu_products().isa_max)' >"$probe"
    got=$("$TRAINER" run "$probe" 2>/dev/null || true); rm -f "$probe"
    [ "$got" = avx2 ] || { echo "bench/vs_pytorch.sh: ISA=avx2 needs a trainer built never to run AVX-512: make ISA_MAX=avx2 CUDA=0 BUILD=build/avx2 TRAINER_BIN=build/avx2/trainer, then TRAINER=build/avx2/trainer ($TRAINER says '$got')" >&2; exit 1; }
    export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ;;
  *) echo "bench/vs_pytorch.sh: ISA=$ISA: the one cap is avx2 (leave ISA unset for the CPU's own)" >&2; exit 1 ;;
esac
[ -f "$MODEL/model.safetensors" ] || bash scripts/fetch_minilm.sh >/dev/null
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
export PYTHONWARNINGS=ignore TRANSFORMERS_VERBOSITY=error HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

if [ "$quick" = 1 ]; then shapes="minilm"; warmup=1; steps=1; sts_steps=8
else shapes="minilm bert-base"; warmup=1; steps=3; sts_steps=30; fi
[ -z "$shapes_opt" ] || shapes=$shapes_opt
if [ "$encode_only" = 1 ]; then
  [ "$train_only" = 0 ] || { echo "bench/vs_pytorch.sh: --train-only and --encode-only leave nothing to run together" >&2; exit 1; }
  shapes=""
fi
rounds=$(seq "$ROUNDS")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
t_start=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

shape_flags() {
  case "$1" in
    minilm) echo "--layers 6 --hidden 384 --heads 12 --intermediate 1536" ;;
    bert-base) echo "--layers 12 --hidden 768 --heads 12 --intermediate 3072" ;;
  esac
}

# measure NAME CMD...: runs CMD under /usr/bin/time; leaves NAME.out (stdout), NAME.err and
# NAME.time ("peak_rss_kib wall_s"). A failed command leaves no NAME.time and a note on stderr.
measure() {
  local name=$1; shift
  if /usr/bin/time -f "%M %e" -o "$work/$name.t" "$@" >"$work/$name.out" 2>"$work/$name.err"; then
    mv "$work/$name.t" "$work/$name.time"
  else
    echo "bench/vs_pytorch.sh: $name failed: $* (last lines of its output below)" >&2
    grep -v '^Command exited' "$work/$name.err" | tail -n 5 >&2 || true
  fi
}
# field NAME KEY: KEY's value in NAME.out; rss NAME: peak RSS in MiB; wall NAME: seconds ("" when absent)
field() { if [ -f "$work/$1.out" ]; then sed -n "s/.*\b$2=\([0-9.]*\).*/\1/p" "$work/$1.out" | tail -n 1; fi; }
rss() { if [ -f "$work/$1.time" ]; then awk '{ printf "%.0f", $1 / 1024 }' "$work/$1.time"; fi; }
wall() { if [ -f "$work/$1.time" ]; then awk '{ print $2 }' "$work/$1.time"; fi; }
progress() { printf '  [%4ss] %s\n' "$(( $(date +%s) - t_start ))" "$*" >&2; }

# ---------------------------------------------------------------- fixed cost of a process
# What a process holds before it does any work: `trainer run` of an empty script (a CUDA build
# maps and initialises libcublasLt at start), and Python with torch and transformers imported.
echo "return 0" >"$work/empty.lua"
measure base.A "$TRAINER" run "$work/empty.lua"
measure base.B "$PY" -c "import torch, transformers"
# (cuBLASLt is dlopened on a GPU's first product, so ldd cannot tell a CUDA build: ask the ops)
echo 'print(require("trainer.core.ops").built("matmul", "cuda") and "cuda" or "cpu")' >"$work/built.lua"
cuda_note=$(if [ "$("$TRAINER" run "$work/built.lua" 2>/dev/null)" = cuda ]; then echo "a CUDA build; cuBLASLt is loaded on a GPU only"; else echo "a CPU-only build"; fi)

# ---------------------------------------------------------------- 32 x 128 training steps
for fam in $families; do
for shape in $shapes; do
  for cfg in $configs; do
    for round in $rounds; do
      progress "$fam $shape $cfg round $round: trainer"
      # shellcheck disable=SC2046
      measure "train.$fam.$shape.$cfg.$round.A" "$TRAINER" run bench/train_step.lua --config "$cfg" --family "$fam" \
        $(shape_flags "$shape") --batch 32 --seq 128 --warmup "$warmup" --steps "$steps"
      progress "$fam $shape $cfg round $round: PyTorch"
      # shellcheck disable=SC2046
      measure "train.$fam.$shape.$cfg.$round.B" "$PY" bench/torch_train_step.py --config "$cfg" --family "$fam" \
        $(shape_flags "$shape") --batch 32 --seq 128 --warmup "$warmup" --steps "$steps"
    done
  done
done
done

# ---------------------------------------------------------------- STS-B LoRA fine-tune
if [ "$train_only" = 0 ]; then
# trainer: samples/s from its metrics.jsonl (each step's tokens / tokens_per_s is its time)
sts_rate() {
  "$PY" - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r.get("step", 0) >= 2]
t = sum(r["tokens"] / r["tokens_per_s"] for r in rows)
print(f"samples_s={16 * len(rows) / t:.1f}")
PY
}
[ "$encode_only" = 1 ] || for round in $rounds; do
  progress "STS-B fine-tune round $round: trainer"
  rm -rf "$work/sts_run"
  measure "sts.$round.A" "$TRAINER" recipes/minilm_sts_lora.lua "steps=$sts_steps" data.eval=nil eval.at_start=false \
    save.final=false log.every=1 "out=\"$work/sts_run\"" --quiet
  if [ -f "$work/sts_run/metrics.jsonl" ]; then sts_rate "$work/sts_run/metrics.jsonl" >"$work/sts.$round.A.out"; fi
  progress "STS-B fine-tune round $round: sentence-transformers"
  measure "sts.$round.B" "$PY" bench/st_compare.py finetune "$MODEL" data/stsb_train.jsonl.gz "$sts_steps"
done

# ---------------------------------------------------------------- encode 1000 sentences
if [ -f ../shared/data/sick_test.jsonl.gz ]; then
  zcat ../shared/data/sick_test.jsonl.gz | head -n 1000 |
    sed -e 's/^{"premise": "//' -e 's/", "hypothesis".*$//' -e 's/\\"/"/g' >"$work/texts.txt" || true
  texts_note="1000 SICK test premises"
else   # without ../shared/data: STS-B's first sentences, shipped in this repository
  zcat data/stsb_dev.jsonl.gz | head -n 1000 | sed -e 's/^{"sentence1": "//' -e 's/", "sentence2".*$//' \
    -e 's/\\"/"/g' >"$work/texts.txt" || true
  texts_note="1000 STS-B dev sentences (../shared/data is missing)"
fi
ntexts=$(wc -l <"$work/texts.txt")
for round in $rounds; do
  progress "encode round $round: trainer"
  measure "enc_in.$round.A" "$TRAINER" run bench/encode_throughput.lua "$MODEL" "$work/texts.txt" 32
  # encode_throughput.lua prints "tokenize_per_s encode_per_s"
  if [ -f "$work/enc_in.$round.A.time" ]; then
    awk '{ print "sentences_s=" $2 }' "$work/enc_in.$round.A.out" >"$work/enc_in.$round.A.tmp"
    mv "$work/enc_in.$round.A.tmp" "$work/enc_in.$round.A.out"
  fi
  measure "enc_cli.$round.A" "$TRAINER" encode "$MODEL" "$work/texts.txt" --batch 32
  progress "encode round $round: sentence-transformers"
  measure "enc_in.$round.B" "$PY" bench/st_compare.py encode "$MODEL" "$work/texts.txt"
done
fi   # train_only

# ---------------------------------------------------------------- table
# row LABEL SHAPE PREFIX KEY: PREFIX.ROUND.{A,B} hold KEY=value lines and their .time files
row() {
  local label=$1 shape=$2 p=$3 key=$4 a b ra rb r
  a=""; b=""; ra=""; rb=""
  for r in $rounds; do
    a="$a $(field "$p.$r.A" "$key")"; b="$b $(field "$p.$r.B" "$key")"
    ra="$ra $(rss "$p.$r.A")"; rb="$rb $(rss "$p.$r.B")"
  done
  awk -v label="$label" -v shape="$shape" -v a="$a" -v b="$b" -v ra="$ra" -v rb="$rb" -v want="$ROUNDS" 'BEGIN {
    na = split(a, A, " "); nb = split(b, B, " "); split(ra, RA, " "); split(rb, RB, " ")
    ta = "n/a"; tb = "n/a"; ratio = "n/a"; med = "n/a"; mem = "n/a"; mratio = "n/a"
    if (na == want) { s = 0; for (i = 1; i <= na; i++) s += A[i]; ta = sprintf(s / na < 100 ? "%.1f" : "%.0f", s / na) }
    if (nb == want) { s = 0; for (i = 1; i <= nb; i++) s += B[i]; tb = sprintf(s / nb < 100 ? "%.1f" : "%.0f", s / nb) }
    ok = (na == want && nb == want)
    for (i = 1; ok && i <= na; i++) if (B[i] <= 0) ok = 0
    if (ok) {
      for (i = 1; i <= na; i++) R[i] = A[i] / B[i]
      for (i = 2; i <= na; i++) { v = R[i]; for (j = i - 1; j >= 1 && R[j] > v; j--) R[j + 1] = R[j]; R[j + 1] = v }
      ratio = sprintf("%.2f-%.2fx", R[1], R[na])
      med = sprintf("%.2fx", na % 2 ? R[(na + 1) / 2] : (R[na / 2] + R[na / 2 + 1]) / 2)
    }
    ma = 0; mb = 0
    for (i in RA) if (RA[i] + 0 > ma) ma = RA[i] + 0
    for (i in RB) if (RB[i] + 0 > mb) mb = RB[i] + 0
    if (ma > 0 && mb > 0) { mem = sprintf("%d / %d", ma, mb); mratio = sprintf("%.2fx", ma / mb) }
    printf "| %-36s | %-9s | %10s | %10s | %12s | %7s | %13s | %6s |\n", label, shape, ta, tb, ratio, med, mem, mratio
  }'
}

echo
echo "bench/vs_pytorch.sh$( [ "$quick" = 1 ] && echo " --quick"): $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $THREADS threads each side, load average before: $load_before"
"$PY" -c 'import torch, transformers, peft, sentence_transformers as s; print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}), transformers {transformers.__version__}, peft {peft.__version__}, sentence-transformers {s.__version__}")' 2>/dev/null || true
# what decides the CPU products on each side: the ISA, and trainer's library and bf16 path
cat >"$work/cpu_products.lua" <<'LUA'
local o = require("trainer.core.ops").cpu_products()
print(("trainer: CPU products on %s, bf16 x bf16 products %s; OPENBLAS_CORETYPE=%s; ISA %s"):format(o.library,
  o.bf16 == "native" and "in bf16" or "widened to f32", os.getenv("OPENBLAS_CORETYPE") or "unset",
  o.isa_max == "avx2" and "held at AVX2 (ISA_MAX=avx2 build; PyTorch: ATEN_CPU_CAPABILITY=avx2)" or "the CPU's"))
LUA
echo "CPU flags: $(grep -o -w -e avx2 -e avx512f -e avx512_bf16 -e amx_bf16 -e avx512_fp16 /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')"
"$TRAINER" run "$work/cpu_products.lua" 2>/dev/null || true
echo "32 x 128 rows: $warmup warm-up + $steps measured step(s) per process; STS-B: $sts_steps steps; $ROUNDS rounds A B A B..."
echo
printf '| %-36s | %-9s | %10s | %10s | %12s | %7s | %13s | %6s |\n' "config" "shape" "trainer" "PyTorch" "ratio" "median" "peak RSS MiB" "ratio"
printf '| %-36s | %-9s | %10s | %10s | %12s | %7s | %13s | %6s |\n' "" "" "" "" "" "" "trainer / PT" ""
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for fam in $families; do
for shape in $shapes; do
  for cfg in $configs; do
    # the family's LoRA targets (bench/families.json), as the rows train them
    targets=$("$PY" -c 'import json, sys; print(",".join(json.load(open("bench/families.json"))[sys.argv[1]]["lora_targets"]))' "$fam")
    case "$cfg" in
      fp32-full) label="fp32 full, tok/s" ;; fp32-lora) label="fp32 LoRA $targets, tok/s" ;;
      bf16-ckpt-lora) label="bf16 + ckpt + LoRA, tok/s" ;; bf16-lora) label="bf16 + LoRA, tok/s" ;;
    esac
    [ "$fam" = bert ] || label="$fam $label"
    row "$label" "$shape" "train.$fam.$shape.$cfg" tokens_s
  done
done
done
if [ "$train_only" = 0 ]; then
[ "$encode_only" = 1 ] || row "STS-B LoRA fine-tune, pairs/s" "minilm" sts samples_s
row "encode in-process, sent/s" "minilm" enc_in sentences_s
for round in $rounds; do   # whole-process encode: sentences / wall seconds, model load included
  for side in "enc_cli.$round.A:enc_proc.$round.A" "enc_in.$round.B:enc_proc.$round.B"; do
    from=${side%%:*} to=${side#*:}
    if [ -f "$work/$from.time" ]; then
      awk -v n="$ntexts" '{ printf "sentences_s=%.1f\n", n / $2 }' "$work/$from.time" >"$work/$to.out"
      cp "$work/$from.time" "$work/$to.time"
    fi
  done
done
row "encode whole process, sent/s" "minilm" enc_proc sentences_s
fi   # train_only
echo
[ "$train_only" = 1 ] || echo "texts for encode: $texts_note; whole process = sentences / wall time of \`trainer encode\` against a Python"
[ "$train_only" = 1 ] || echo "process that imports sentence-transformers, loads the model and encodes (the in-process figures warm up on"
[ "$train_only" = 1 ] || echo "one batch first, both sides)."
nockpt=$(grep -l 'checkpointing=unsupported' "$work"/train.*.B.out 2>/dev/null | sed 's|.*/train\.\([a-z]*\)\..*|\1|' | sort -u | tr '\n' ' ' || true)
[ -z "$nockpt" ] || echo "PyTorch side of bf16 + ckpt + LoRA without checkpointing for: $nockpt(transformers has none for that family)."
byhand=$(grep -l 'checkpointing=by-hand' "$work"/train.*.B.out 2>/dev/null | sed 's|.*/train\.\([a-z]*\)\..*|\1|' | sort -u | tr '\n' ' ' || true)
[ -z "$byhand" ] || echo "PyTorch side of bf16 + ckpt + LoRA checkpointed by hand (torch.utils.checkpoint around each encoder layer; transformers has no checkpointing for that family) for: $byhand"
echo "Throughput: mean of the rounds; ratio: the range of the rounds' trainer/PyTorch, and their median; peak RSS:"
echo "the largest round. Took $(( $(date +%s) - t_start )) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
echo "Fixed cost of a process before any work (peak RSS): \`trainer run\` of an empty script $(rss base.A) MiB ($cuda_note),"
echo "python -c 'import torch, transformers' $(rss base.B) MiB; both are inside the RSS figures above."
