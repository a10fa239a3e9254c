#!/usr/bin/env bash
# tests/cudacpu/train_parity.sh — whole training runs (`trainer RECIPE`) on device = "cuda"
# against the same recipe on the CPU, with one binary (TRAINER, default build/cudacpu/trainer;
# tests/cudacpu/train_lib.sh). The tiny encoder of train_fixture.lua, MNRL, AdamW, dropout 0.1,
# grad_clip 1, 6 steps: the weights, batches and dropout masks are the same on both devices
# (the RNG is counter-based, core/base/rng.c), so the runs differ only by the order of float
# sums (cuBLASLt's against OpenBLAS/oneDNN's, the kernels' reductions).
#   train_fp32_full         every step's loss and clip norm within 1e-5 relative (fp32: a few
#                           ulps per sum, measured about 3e-7);
#   train_bf16_ckpt_lora    bf16 + checkpointing of every layer + LoRA (r 4 on query, value):
#                           within 1e-2 (bf16 keeps 8 bits: one rounding of an activation
#                           is 4e-3 relative, and the two devices round different sums);
#   train_accumulate        batch.size 4, batch.accumulate 2 (two micro-batches a step, the
#                           batch feed's two slots both in use within a step): within 1e-5;
#   train_batch_feed        the cuda run's batches go through the pinned batch feed (run.lua
#                           makes one for every device run): an on_step hook reads t.feed and
#                           requires a feed with pinned slots whose slot alternates; its losses
#                           within 1e-5 of the CPU's (the hook also makes every step read);
#   train_tanh_gelu         a random classifier with hidden_act "gelu_new", whose feed-forward
#                           runs the GELU and its derivative in the cuBLASLt products' epilogues
#                           on cuda (linear_gelu, linear_backward_dgelu): fp32, within 1e-5;
#   train_tanh_gelu_bf16_ckpt_lora  the same in bf16 with checkpointing of every layer and LoRA
#                           (the frozen feed-forward in bf16: its products take the epilogues,
#                           the forward recomputed in the backward too): within 1e-2.
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_fp32_full train_bf16_ckpt_lora train_accumulate train_batch_feed train_tanh_gelu train_tanh_gelu_bf16_ckpt_lora"
need_cuda
fixture

R="$FX/mnrl.lua"
parity train_fp32_full fp32 "$FP32" "$R"
LORA='lora={r=4,alpha=8,dropout=0.1,targets={"query","value"}}'
parity train_bf16_ckpt_lora bf16 "$BF16" "$R" precision=bf16 checkpoint='{every=1}' "$LORA"
WHAT="4 x 2 micro-batches" parity train_accumulate acc "$FP32" "$R" batch.size=4 batch.accumulate=2

# The hook's record: one line a step, "step slot pinned" (the feed's slot after the step's batch).
cat >"$FX/feed.lua" <<LUA
return { extends = "mnrl.lua", hooks = { on_step = function(t)
  local f = assert(io.open("$W/runs/feed_steps.txt", "a"))
  f:write(t.step, " ", t.feed and t.feed:slot() or "none", " ", tostring(t.feed and t.feed:pinned()), "\n")
  f:close()
end } }
LUA
train feed_cuda "$FX/feed.lua" device=cuda; b=$?
steps=$(cat "$W/runs/feed_steps.txt" 2>/dev/null | tr '\n' ';')
if [ $b = 0 ] && ! awk 'BEGIN { bad = 0 } { if ($2 == "none" || $3 != "true" || (NR > 1 && $2 == last)) bad = 1; last = $2 }
    END { exit (bad || NR != 6) }' "$W/runs/feed_steps.txt"; then
  fail train_batch_feed "the feed was not in use every step (step slot pinned: $steps)"
else
  judge train_batch_feed feed_cuda $b fp32_cpu 0 "loss:1e-5,grad_norm:1e-5" "pinned slots alternating over 6 steps"
fi

# A random classifier with the tanh GELU (intermediate 128: the epilogues' aux stride a multiple of 8).
cat >"$FX/tanh.lua" <<LUA
return {
  model = { arch = "bert", init = "random", tokenizer = "$FX/cls", task = "classification", num_labels = 3,
    max_length = 24, config = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2,
    intermediate_size = 128, vocab_size = 500, max_position_embeddings = 64, hidden_act = "gelu_new" } },
  data = { train = "$FX/pairs.jsonl", columns = { "sentence1", "sentence2", "label" } },
  loss = { name = "cross_entropy" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 6,
  grad_clip = 1.0, log = { every = 4, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3,
}
LUA
parity train_tanh_gelu tanh "$FP32" "$FX/tanh.lua"
parity train_tanh_gelu_bf16_ckpt_lora tanh_bf16 "$BF16" "$FX/tanh.lua" precision=bf16 checkpoint='{every=1}' "$LORA"
finish
