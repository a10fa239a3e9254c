#!/usr/bin/env bash
# tests/gpu/train_parity.sh — training on the GPU against the CPU, called by
# tests/gpu/run.sh after the op checks; runs from the bundle (make gpu-bundle: trainer, lua/,
# recipes/, bench/gpu/ beside it) or from a built checkout.
#   1. a tiny BERT, fp32, 5 steps (MNRL, AdamW, dropout 0.1): every loss on the GPU within 1e-4
#      relative of the CPU's (same weights and batch, bench/gpu/trainer_side.lua; the dropout
#      masks are the same bits on both, core/base/rng.c);
#   2. all-MiniLM-L6-v2 (models/all-MiniLM-L6-v2 when present, else its shape with random
#      weights, said in the line), bf16 + checkpointing + LoRA, 20 steps of 16 x 64: within
#      1e-2 relative;
#   3. exact resume on the GPU: a tiny recipe stopped by SIGINT at step 3 and resumed gives
#      metrics.jsonl losses bitwise those of the unbroken 6-step run. Where it does not, the
#      line names the first step that differs: a kernel that is not deterministic (float
#      atomics) shows up here, and the run of 1. tells whether the same run repeats.
# Prints PASS/FAIL/SKIP lines (SKIP for all without a GPU or without ./trainer) and
# "N passed, N failed". OUT (default build/gpu_out) receives train_parity/ (raw lines, runs).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-build/gpu_out}
W="$OUT/train_parity"
mkdir -p "$W"
TRAINER=${TRAINER:-./trainer}
passed=0; failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
names="train_parity_tiny_fp32 train_parity_minilm_bf16_lora train_parity_resume_exact"
skip_all() { for n in $names; do echo "SKIP $n: $1"; done; echo "0 passed, 0 failed"; exit 0; }

[ -x "$TRAINER" ] || skip_all "no $TRAINER (minimal build: run from the bundle)"
ngpu=$("$TRAINER" run <(echo 'print(tonumber(require("trainer.core.ffi").tr_cuda_device_count()))') 2>/dev/null)
[ "${ngpu:-0}" -gt 0 ] 2>/dev/null || skip_all "no GPU visible to trainer"

side() { "$TRAINER" run bench/gpu/trainer_side.lua "$@" 2>>"$W/stderr.txt"; }
losses_of() { sed -n 's/.*losses=//p' <<<"$1"; }
# compare two comma lists of losses within a relative tolerance; prints the worst difference
within() { # a b tol -> exit 0 when every pair is within tol
  awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN {
    n = split(a, x, ","); m = split(b, y, ",")
    if (n == 0 || n != m) { print "lengths " n " and " m; exit 1 }
    worst = 0
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; s = y[i] < 0 ? -y[i] : y[i]
      r = d / (s > 1e-12 ? s : 1e-12); if (r > worst) { worst = r; at = i } }
    if (worst == 0) printf "identical over %d steps", n
    else printf "worst relative difference %.3g at step %d of %d", worst, at, n
    exit (worst <= tol ? 0 : 1) }'
}

# ---- 1. tiny fp32, CPU against GPU
side --write "$W/tiny" --shape tiny --seq 32 >/dev/null
cpu=$(losses_of "$(side --train "$W/tiny" --config fp32-full --rows 16 --device cpu --warmup 0 --steps 5 --losses)")
gpu=$(losses_of "$(side --train "$W/tiny" --config fp32-full --rows 16 --device cuda --warmup 0 --steps 5 --losses)")
echo "tiny fp32 losses: cpu $cpu; gpu $gpu" >>"$W/raw.txt"
if [ -z "$gpu" ]; then fail train_parity_tiny_fp32 "the GPU run failed (see $W/stderr.txt)"
elif why=$(within "$gpu" "$cpu" 1e-4); then pass "train_parity_tiny_fp32 ($why)"
else fail train_parity_tiny_fp32 "$why; cpu $cpu, gpu $gpu"; fi

# ---- 2. MiniLM, bf16 + checkpointing + LoRA, 20 steps
what="all-MiniLM-L6-v2"
if [ -f models/all-MiniLM-L6-v2/model.safetensors ]; then
  mkdir -p "$W/minilm"
  cp models/all-MiniLM-L6-v2/config.json "$W/minilm/"
  ln -sf "$(pwd)/models/all-MiniLM-L6-v2/model.safetensors" "$W/minilm/model.safetensors"
  side --write "$W/minilm_rand" --shape minilm --seq 64 >/dev/null   # only its batch is used
  cp "$W/minilm_rand/batch.safetensors" "$W/minilm/"
else
  what="all-MiniLM-L6-v2's shape, random weights (models/all-MiniLM-L6-v2 absent)"
  side --write "$W/minilm" --shape minilm --seq 64 >/dev/null
fi
cpu=$(losses_of "$(side --train "$W/minilm" --config bf16-ckpt-lora --rows 16 --device cpu --warmup 0 --steps 20 --losses)")
gpu=$(losses_of "$(side --train "$W/minilm" --config bf16-ckpt-lora --rows 16 --device cuda --warmup 0 --steps 20 --losses)")
echo "minilm bf16 lora losses ($what): cpu $cpu; gpu $gpu" >>"$W/raw.txt"
if [ -z "$gpu" ] || [ -z "$cpu" ]; then fail train_parity_minilm_bf16_lora "a run failed (see $W/stderr.txt)"
elif why=$(within "$gpu" "$cpu" 1e-2); then pass "train_parity_minilm_bf16_lora ($what; $why)"
else fail train_parity_minilm_bf16_lora "$what: $why; cpu $cpu, gpu $gpu"; fi

# ---- 3. exact resume on the GPU
# a tiny BERT and 48 pairs of 4 to 7 words (testlib.sentences: the bundle carries tests/lua/testlib.lua)
cat >"$W/fixture.lua" <<LUA
local lib = dofile("tests/lua/testlib.lua")
require("trainer.models").tiny_folder("$W/rtiny", { seed = 1 })
local _, sent = lib.sentences(7, lib.concat(lib.words, { "very" }), 3, 4)
local rows = {}
for i = 1, 48 do rows[i] = ('{"sentence1": "%s", "sentence2": "%s"}\n'):format(sent(), sent()) end
lib.write("$W/train.jsonl", table.concat(rows))
LUA
"$TRAINER" run "$W/fixture.lua" 2>>"$W/stderr.txt"
cat >"$W/resume.lua" <<LUA
return {
  model = { from = "$W/rtiny" }, data = { train = "$W/train.jsonl", columns = { "sentence1", "sentence2" } },
  loss = { name = "mnrl" }, optim = { lr = 1e-3 }, batch = { size = 8 }, steps = 6, grad_clip = 1.0,
  save = { every = 3, keep = 5 }, log = { every = 1, quiet = true }, device = "cuda", seed = 3,
  hooks = { on_step = function(t)
    if t.step == tonumber(os.getenv("STOP_AT") or "") then
      local ffi = require("ffi")
      pcall(ffi.cdef, "int kill(int pid, int sig); int getpid(void);")
      ffi.C.kill(ffi.C.getpid(), 2)
    end
  end },
}
LUA
rm -rf "$W/runs"
"$TRAINER" "$W/resume.lua" out="$W/runs/whole" >/dev/null 2>>"$W/stderr.txt"; a=$?
STOP_AT=3 "$TRAINER" "$W/resume.lua" out="$W/runs/split" >/dev/null 2>>"$W/stderr.txt"
"$TRAINER" resume "$W/runs/split" >/dev/null 2>>"$W/stderr.txt"; b=$?
lw=$(grep -o '"loss": *[^,}]*' "$W/runs/whole/metrics.jsonl" 2>/dev/null | tr '\n' ' ')
ls_=$(grep -o '"loss": *[^,}]*' "$W/runs/split/metrics.jsonl" 2>/dev/null | tr '\n' ' ')
echo "resume: whole rc $a [$lw]; split+resume rc $b [$ls_]" >>"$W/raw.txt"
if [ "$a" != 0 ] || [ "$b" != 0 ]; then fail train_parity_resume_exact "a run failed (rc $a, $b; see $W/stderr.txt)"
elif [ -n "$lw" ] && [ "$lw" = "$ls_" ]; then pass "train_parity_resume_exact (6 losses bitwise)"
else
  first=$(paste <(tr ' ' '\n' <<<"$lw") <(tr ' ' '\n' <<<"$ls_") | awk '$0 != "" && $1 != $2 { print NR; exit }')
  fail train_parity_resume_exact "losses differ from step ${first:-?}: whole [$lw], resumed [$ls_]"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
