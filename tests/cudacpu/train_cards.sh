#!/usr/bin/env bash
# tests/cudacpu/train_cards.sh — the run on cards other than the emulator's default sm_90:
# build/cudacpu-sm75/trainer (TRAINER75: the kernels compiled with __CUDA_ARCH__ 750, `make
# cudacpu`) on an emulated sm_75 device (CUDACPU_ARCH=75: f16 tensor cores, no bf16), and the
# sm_90 binary (TRAINER) where a card or driver cannot run it.
#   card_sm75_fp16_training   fp16 + checkpointing + LoRA on a head size of 32 trains at sm_75
#                             as on the CPU (every step's loss and clip norm within 1e-2, as
#                             train_attention_tc's), its attention on the f16 tensor-core kernels
#   card_sm75_refuses_bf16    precision = "bf16" at sm_75 stops before the model is built: exit
#                             1, one paragraph naming the card, compute capability 7.5 and
#                             precision = "fp16"; nothing written into the run folder
#   card_sm75_plan_and_ledger `trainer plan` and trainer.memory.report() name the card
#   card_no_code_for_card     the sm_90 binary on an sm_75 device: exit 1, the paragraph says the
#                             binary carries no code for compute capability 7.5 and names sm_90
#   card_old_driver           a driver that supports CUDA 12.4 under the CUDA 13.0 runtime:
#                             device = "cuda" exits 1 naming both versions and the CUDA 12
#                             bundle; device = "auto" trains on the CPU and says why, once
set -u
. "$(dirname "$0")/train_lib.sh"
names "card_sm75_fp16_training card_sm75_refuses_bf16 card_sm75_plan_and_ledger card_no_code_for_card card_old_driver"
TRAINER75=${TRAINER75:-build/cudacpu-sm75/trainer}
if [ ! -x "$TRAINER75" ]; then
  for n in $NAMES; do skip "$n" "no $TRAINER75 (make cudacpu builds it)"; done
  finish
fi
need_cuda
fixture

# train75 NAME ARGS...: the sm_75 binary on an sm_75 device
train75() { local n=$1; shift
  CUDACPU_ARCH=75 "$TRAINER75" "$@" out="$W/runs/$n" --quiet >"$W/runs/$n.log" 2>&1; }
# has FILE TEXT...: every TEXT is in FILE (fixed strings); the first missing one on stdout
has() { local f=$1 t; shift; for t in "$@"; do grep -qF -- "$t" "$f" || { echo "$t"; return 1; }; done; }

cat >"$FX/tc32.lua" <<LUA
return {
  model = { arch = "bert", init = "random", tokenizer = "$FX/cls", task = "classification", num_labels = 3,
    max_length = 32, config = { hidden_size = 64, num_hidden_layers = 2, num_attention_heads = 2,
    intermediate_size = 128, vocab_size = 500, max_position_embeddings = 64 } },
  data = { train = "$FX/pairs.jsonl", columns = { "sentence1", "sentence2", "label" } },
  loss = { name = "cross_entropy" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 6,
  grad_clip = 1.0, log = { every = 4, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3, checkpoint = { every = 1 },
  lora = { r = 4, alpha = 8, dropout = 0.1, targets = { "query", "value" } },
}
LUA

# fp16 at sm_75 against the CPU, attention on the f16 tensor cores
train f16_cpu "$FX/tc32.lua" device=cpu precision=fp16; a=$?
CUDACPU_STATS=2 train75 f16_sm75 "$FX/tc32.lua" device=cuda precision=fp16; b=$?
missing=""
for k in attn_tc_fwd_kernel attn_tc_dkv_kernel attn_tc_dq_kernel; do
  grep -q "cudacpu: ran $k" "$W/runs/f16_sm75.log" || missing="$missing $k"
done
if [ $b = 0 ] && [ -n "$missing" ]; then fail card_sm75_fp16_training "the sm_75 run did not launch$missing"
else judge card_sm75_fp16_training f16_sm75 $b f16_cpu $a "loss:1e-2,grad_norm:1e-2,lr:0,tokens:0" \
  "sm_75, f16 tensor-core attention"; fi

# bf16 refused at sm_75, before anything is built or written
train75 bf16_sm75 "$FX/tc32.lua" device=cuda precision=bf16; rc=$?
log="$W/runs/bf16_sm75.log"
if [ $rc != 1 ]; then fail card_sm75_refuses_bf16 "exit $rc, not 1: $(tail -n 3 "$log" | tr '\n' ' ')"
elif miss=$(has "$log" 'precision = "bf16"' "compute capability 7.5" 'precision = "fp16"' "cuda:0"); then
  if grep -q "traceback" "$log"; then fail card_sm75_refuses_bf16 "a traceback: $(head -n 3 "$log")"
  elif [ -n "$(ls -A "$W/runs/bf16_sm75" 2>/dev/null | grep -v '^\.')" ]; then
    fail card_sm75_refuses_bf16 "the run folder holds $(ls "$W/runs/bf16_sm75" | tr '\n' ' ')"
  else pass card_sm75_refuses_bf16 "$(head -c 160 "$log")..."; fi
else fail card_sm75_refuses_bf16 "the message lacks '$miss': $(cat "$log")"; fi

# plan and ledger name the card
CUDACPU_ARCH=75 "$TRAINER75" plan "$FX/tc32.lua" device=cuda precision=fp16 >"$W/plan75.txt" 2>&1
cat >"$W/ledger.lua" <<'LUA'
local T = require("trainer.core.tensor")
local t = T.zeros({ 64 }, { device = "cuda" })
print(require("trainer.core.memory").report("cuda"))
t:free()
LUA
CUDACPU_ARCH=75 "$TRAINER75" run "$W/ledger.lua" >"$W/ledger75.txt" 2>&1
if miss=$(has "$W/plan75.txt" "on cuda: cudacpu (CPU emulation of an sm_75 device), compute capability 7.5") &&
   miss=$(has "$W/ledger75.txt" "memory on cuda:0 (cudacpu (CPU emulation of an sm_75 device), compute capability 7.5)"); then
  pass card_sm75_plan_and_ledger
else fail card_sm75_plan_and_ledger "missing '$miss' in: $(head -n 2 "$W/plan75.txt" "$W/ledger75.txt" | tr '\n' ' ')"; fi

# the sm_90 binary carries no code for an sm_75 card
CUDACPU_ARCH=75 train nocode "$FX/tc32.lua" device=cuda precision=fp16; rc=$?
log="$W/runs/nocode.log"
if [ $rc != 1 ]; then fail card_no_code_for_card "exit $rc, not 1: $(tail -n 3 "$log" | tr '\n' ' ')"
elif miss=$(has "$log" "carries no code for this card" "compute capability 7.5" "sm_90" "cudaErrorNoKernelImageForDevice"); then
  pass card_no_code_for_card
else fail card_no_code_for_card "the message lacks '$miss': $(cat "$log")"; fi

# a driver older than the runtime
CUDACPU_DRIVER=12040 train olddrv "$FX/tc32.lua" device=cuda; rc=$?
CUDACPU_DRIVER=12040 train olddrv_auto "$FX/tc32.lua" device=auto steps=1; rc_auto=$?
log="$W/runs/olddrv.log"; alog="$W/runs/olddrv_auto.log"
if [ $rc != 1 ]; then fail card_old_driver "device=cuda: exit $rc, not 1: $(tail -n 3 "$log" | tr '\n' ' ')"
elif ! miss=$(has "$log" "supports CUDA 12.4" "CUDA 13.0 runtime" "gpu-bundle-cuda12" "cudaErrorInsufficientDriver"); then
  fail card_old_driver "the message lacks '$miss': $(cat "$log")"
elif [ $rc_auto != 0 ]; then fail card_old_driver "device=auto: exit $rc_auto: $(tail -n 3 "$alog" | tr '\n' ' ')"
elif [ "$(grep -c 'device = "auto" runs on the CPU' "$alog")" != 1 ]; then
  fail card_old_driver "device=auto did not say once why it runs on the CPU: $(cat "$alog")"
else pass card_old_driver; fi
finish
