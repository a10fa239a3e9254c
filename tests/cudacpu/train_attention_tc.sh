#!/usr/bin/env bash
# tests/cudacpu/train_attention_tc.sh — bf16 training whose attention runs on the tensor-core
# kernels (kernels/cuda/attention_tc.cu: bf16/f16, head sizes a multiple of 16 in 32..128)
# against the same recipe on the CPU. The fixture's encoders have heads of 16, which stay on
# the fp32-register kernels, so this recipe is nli.lua's on a random BERT of heads of 32 and of
# 64 (hidden 64 or 128, 2 heads, 2 layers): attention dropout 0.1, padded batches (masks),
# bf16 + checkpointing of every layer (the recompute replays the dropout stream) + LoRA.
#   train_attention_tc_d32, train_attention_tc_d64
#       every step's loss and clip norm within 1e-2 of the CPU's (the bound of train_parity's
#       bf16 run: bf16 keeps 8 bits and the devices round different sums), and the cuda
#       run's kernels (CUDACPU_STATS=2) include the tensor-core forward and both backward ones.
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_attention_tc_d32 train_attention_tc_d64"
need_cuda
fixture

LORA='lora={r=4,alpha=8,dropout=0.1,targets={"query","value"}}'
for hd in 32 64; do
  cat >"$FX/tc$hd.lua" <<LUA
return {
  model = { arch = "bert", init = "random", tokenizer = "$FX/cls", task = "classification", num_labels = 3,
    max_length = 32, config = { hidden_size = $((2 * hd)), num_hidden_layers = 2, num_attention_heads = 2,
    intermediate_size = 128, vocab_size = 500, max_position_embeddings = 64 } },
  data = { train = "$FX/pairs.jsonl", columns = { "sentence1", "sentence2", "label" } },
  loss = { name = "cross_entropy" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 6,
  grad_clip = 1.0, log = { every = 4, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3,
}
LUA
  train tc${hd}_cpu "$FX/tc$hd.lua" device=cpu precision=bf16 checkpoint='{every=1}' "$LORA"; a=$?
  CUDACPU_STATS=2 train tc${hd}_cuda "$FX/tc$hd.lua" device=cuda precision=bf16 checkpoint='{every=1}' "$LORA"; b=$?
  missing=""
  for k in attn_tc_fwd_kernel attn_tc_dkv_kernel attn_tc_dq_kernel; do
    grep -q "cudacpu: ran $k" "$W/runs/tc${hd}_cuda.log" || missing="$missing $k"
  done
  if [ $b = 0 ] && [ -n "$missing" ]; then
    fail train_attention_tc_d$hd "the cuda run did not launch$missing"
  else
    judge train_attention_tc_d$hd tc${hd}_cuda $b tc${hd}_cpu $a "loss:1e-2,grad_norm:1e-2,lr:0,tokens:0" \
      "head size $hd on the tensor-core kernels"
  fi
done
finish
