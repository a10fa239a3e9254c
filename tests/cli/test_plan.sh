#!/usr/bin/env bash
# `trainer plan` end to end: exit status against the budget, the alternatives it prints (each
# pasted after the recipe must fit), where the budget came from, and the command it prints
# when the model folder is missing (run verbatim, it must work).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
R=recipes/scandi_lora.lua
PRESET="model.from=nil model.arch=bert model.config=bert-large"
# The figures below are the OpenBLAS path's: with oneDNN a CPU plan adds the packed Linear
# weights to workspace (checked at the end), which would move every total on a machine
# that has it.
export TRAINER_CPU_GEMM=openblas

# runs a printed command line as a user would paste it into a shell, `trainer` on the PATH
run_line() {
  PATH="$ROOT:$PATH" bash -c "$1" >"$TMP/out" 2>"$TMP/err" </dev/null
  RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
}

# ---- exit status: 0 fits (or no budget), 2 does not fit (as out of memory), 1 user error
run_trainer plan $R $PRESET --budget 8GiB
expect_rc plan_fits_rc 0
run_trainer plan $R $PRESET --budget 2GiB
expect_rc plan_over_budget_rc 2
expect_out plan_over_budget_says "does NOT fit the budget of 2.00 GiB"
run_trainer plan $R $PRESET --budget 2GiB --json
expect_rc plan_over_budget_json_rc 2
expect_out plan_json_fits_false '"fits": false'
expect_out plan_json_alternatives '"alternatives": ['
expect_out plan_json_total '"total_bytes":'
run_trainer plan $R $PRESET memory=nil
expect_rc plan_no_budget_rc 0
run_trainer --help
expect_out plan_usage_exit_code "exit 2 when it does not fit the budget"

# ---- the alternatives: planned for what scandi_lora lacks, each fits when pasted
run_trainer plan $R $PRESET --budget 2GiB
expect_out plan_alt_batch "  batch.size=8 batch.accumulate=2 -> 1.48 GiB (fits;"
expect_out plan_alt_cached "  loss.cached=true"
expect_no_out plan_alt_not_generic "shrink activations with checkpoint"
expect_no_out plan_alt_not_lora "lora="
expect_no_out plan_alt_not_bf16 "precision="
grep -E '^  .* -> .* \(fits;' "$TMP/out" | sed -E 's/ -> .*//' >"$TMP/alts"
n=0
while IFS= read -r alt; do
  n=$((n + 1))
  run_line "trainer plan $R $PRESET $alt --budget 2GiB"
  expect_rc "plan_alt_${n}_pasted_fits" 0
  expect_out "plan_alt_${n}_pasted_says_fits" "fits the budget of 2.00 GiB"
done <"$TMP/alts"
if [ "$n" -ge 2 ]; then pass plan_alt_count; else fail plan_alt_count "expected at least 2 alternatives, got $n"; fi

# ---- where the budget came from when it is not --budget
# (on the CPU the budget is what a run there may use: memory.limit or this machine's RAM,
# whichever is smaller; a plan for a GPU keeps the recipe's gpu_budget)
run_trainer plan $R $PRESET device=cuda
expect_out plan_budget_source "the budget is memory.limit in recipes/base/lora_bf16.lua, from gpu_budget in recipes/base/sizes.lua, for a run on cuda"
run_trainer plan $R $PRESET device=cpu
expect_out plan_cpu_budget_names_cpu ", for a run on cpu"
expect_no_out plan_cpu_budget_not_gpu_budget "gpu_budget"
run_trainer plan $R $PRESET device=cpu memory.limit=1GiB
expect_out plan_cpu_budget_limit "the budget is memory.limit on the command line, for a run on cpu"
# ---- the header: texts per micro-batch, as planned (MNRL on triplets: 3 texts a row)
expect_out plan_header_texts "(micro-batch: 16 rows x 3 texts = 48 texts of up to 512 tokens;"
run_trainer plan recipes/nli_classifier.lua model.from=nil model.arch=bert model.config=minilm-l6 model.tokenizer=x
expect_out plan_header_one_text_a_row "(micro-batch: 16 texts of up to 128 tokens;"
run_trainer plan $R $PRESET memory.limit=1GiB
expect_rc plan_budget_override_rc 2
expect_out plan_budget_override_source "the budget is memory.limit on the command line"

# ---- no model folder: the printed command works as printed
if [ -e models/scandi-nli-large/config.json ]; then
  echo "SKIP plan_hint: models/scandi-nli-large is downloaded here"
else
  run_trainer plan $R
  expect_rc plan_hint_rc 1
  expect_err plan_hint_download "huggingface-cli download alexandrainst/scandi-nli-large --local-dir models/scandi-nli-large"
  hint=$(grep -E '^  trainer plan ' "$TMP/err" | sed 's/^  //')
  if [ -n "$hint" ]; then pass plan_hint_printed; else fail plan_hint_printed "no '  trainer plan ...' line"; show; fi
  run_line "$hint"
  expect_rc plan_hint_verbatim_rc 0
  expect_out plan_hint_verbatim_plan "memory plan for recipes/scandi_lora.lua"

  # overrides that need quoting and the flags survive into the printed command
  run_trainer plan $R 'lora.targets={"query","key"}' batch.size=8 --budget 8GiB --json
  hint=$(grep -E '^  trainer plan ' "$TMP/err" | sed 's/^  //')
  case "$hint" in
    *"'lora.targets={\"query\",\"key\"}' batch.size=8"*"--budget 8GiB --json") pass plan_hint_keeps_overrides ;;
    *) fail plan_hint_keeps_overrides "printed: $hint" ;;
  esac
  run_line "$hint"
  expect_rc plan_hint_quoted_rc 0
  expect_out plan_hint_quoted_json '"fits": true'
  expect_out plan_hint_quoted_batch '"micro_batch": 8'
fi

# ---- oneDNN (a build and machine that have it): the packed weights are in the plan's workspace,
# as this machine's oneDNN packs them: bert-large's f32 Linear weights trained in micro-batches,
# which share their packs, twice (a blocked layout: forward and input gradient) or once (AVX2:
# the forward's only); frozen (LoRA), one pack at a time
TRAINER_CPU_GEMM=onednn run_trainer plan $R $PRESET memory=nil precision=fp32 lora=nil batch.accumulate=2
if grep -q "TRAINER_CPU_GEMM=onednn:" "$TMP/err"; then
  echo "SKIP plan_onednn_packed: no oneDNN in this build or on this machine"
else
  expect_rc plan_onednn_rc 0
  if grep -qF "workspace holds 2.25 GiB of Linear weights packed for oneDNN (f32, forward and input gradient;" "$TMP/out" ||
    grep -qF "workspace holds 1.13 GiB of Linear weights packed for oneDNN (f32, forward only:" "$TMP/out"; then
    pass plan_onednn_packed
  else
    fail plan_onednn_packed "stdout lacks the packed weights (2.25 GiB both products, or 1.13 GiB the forward's)"
    show
  fi
  TRAINER_CPU_GEMM=onednn run_trainer plan $R $PRESET memory=nil precision=fp32
  expect_rc plan_onednn_frozen_rc 0
  expect_out plan_onednn_frozen_one_at_a_time "workspace holds 16.00 MiB of Linear weights packed for oneDNN"
  expect_out plan_onednn_frozen_says "each made for its product and freed after it, so one at a time"
fi
TRAINER_CPU_GEMM=blis run_trainer plan $R $PRESET memory=nil
expect_rc plan_bad_cpu_gemm_rc 1
expect_err plan_bad_cpu_gemm_says 'TRAINER_CPU_GEMM="blis" is not a CPU matrix library: set it to openblas or onednn'

# ---- --card NAME: planned for a card this machine does not have (lua/trainer/plan/cards.lua)
run_trainer plan $R $PRESET --card a10
expect_rc plan_card_a10_rc 0
expect_out plan_card_names_it "on cuda: A10, compute capability 8.6, 22.49 GiB, planned with --card"
expect_out plan_card_budget "the A10's memory (22.49 GiB)"
run_trainer plan $R $PRESET --card v100-16
expect_rc plan_card_v100_bf16_rc 1
expect_err plan_card_v100_refuses_bf16 'precision = "bf16": --card v100-16 is Tesla V100 16 GB (compute capability 7.0)'
expect_err plan_card_v100_says_fp16 'Use precision = "fp16" on this card'
run_trainer plan $R $PRESET --card v100-16 precision=fp16 --json
expect_rc plan_card_v100_fp16_rc 0
expect_out plan_card_json '"compute_capability": "7.0"'
expect_out plan_card_json_planned '"planned": true'
run_trainer plan $R $PRESET --card "NVIDIA T4" precision=fp16 --budget 1GiB
expect_rc plan_card_budget_flag_wins 2
run_trainer plan $R $PRESET --card k80
expect_rc plan_card_unknown_rc 1
expect_err plan_card_unknown_lists "not a card this plan knows; use one of a10, a100-40"
run_trainer plan $R --card a10
expect_err plan_card_in_model_hint "--card a10"

finish
