#!/usr/bin/env bash
# batch.size = "auto" and memory.fit = true end to end on the CPU (lua/trainer/plan/fit.lua):
# under memory.limit below the recipe's need each chooses a configuration whose measured peak
# (summary.json's peak_reserved, what the limit bounds) stays under the limit, without an
# out-of-memory error, at several budgets; the effective batch and the first step's loss are
# the unchanged recipe's where the change is exact (accumulation, checkpointing); the choice
# is printed, recorded in resolved_recipe.lua and summary.json, and kept by a resume;
# `trainer plan --fit` prints it without running; nothing that fits is exit 2 naming the key.
# The shape: a classifier of hidden 128, 5 layers, 32 rows of 64 tokens (about 70 MiB planned).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
# the time model's rates, fixed (the figures its probe measured on a 2-core AVX2 EPYC) so that the
# choices do not depend on the machine
export TRAINER_CPU_RATES=gflops=178,gbps=40,rows_half=102,op_us=122,token_ns=16.4,token_half_ns=33.9,product_half=1.10
FX="$TMP/fx"
"$TRAINER" run tests/cudacpu/train_fixture.lua "$FX" >/dev/null 2>&1 || { fail fixture "train_fixture.lua failed"; finish; exit; }
cat >"$TMP/cls.lua" <<EOF
return {
  steps = 2, seed = 3, device = "cpu",
  loss = { name = "cross_entropy" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 32 },
  grad_clip = 1.0, log = { every = 1, quiet = true, tensorboard = false }, eval = { at_start = false },
  save = { every = 1, final = false },
  model = { arch = "bert", init = "random", tokenizer = "$FX/cls", task = "classification", num_labels = 3,
    max_length = 64, dropout = 0, config = { hidden_size = 128, num_hidden_layers = 5, num_attention_heads = 4,
    intermediate_size = 512, vocab_size = 500, max_position_embeddings = 512 } },
  data = { train = "$FX/long.jsonl", columns = { "sentence1", "sentence2", "label" } },
}
EOF
# the run's figures: rc, peak_reserved, step 1's loss, batch size x accumulate, fit overrides
facts() { # RUN_DIR
  "$TRAINER" run <(cat <<'EOF'
local json = require("trainer.core.json")
local dir = arg[1]
local s = json.read(dir .. "/summary.json")
local f = io.open(dir .. "/metrics.jsonl") local first = json.decode(f:read("*l")) f:close()
local r = require("trainer.recipe.sandbox").read_data(dir .. "/resolved_recipe.lua", {})
print(("%d %.9g %d %d %s %s"):format(s.peak_reserved, first.loss, r.batch.size, r.batch.accumulate,
  tostring(r.checkpoint == "auto"), table.concat(s.fit and s.fit.overrides or { "-" }, ",")))
EOF
) "$1"
}
bytes() { "$TRAINER" run <(echo 'print(require("trainer.recipe.schema").parse_size(arg[1]))') "$1"; }
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 2e-5 * (a < 0 ? -a : a) + 1e-7) }'; }

# ---- the recipe unchanged: its need and its first loss
run_trainer "$TMP/cls.lua" out="$TMP/base"
expect_rc fit_base_rc 0
read -r _ BASE_LOSS _ <<<"$(facts "$TMP/base")"
run_trainer plan "$TMP/cls.lua" --json
need=$(grep -m1 '"total_bytes"' "$TMP/out" | tr -dc 0-9)
# above what a run fitted to the largest budget below, 70 MiB, may plan (a tenth of it and 22 MiB
# are kept free: 41 MiB), so that every budget makes the fit change the recipe
[ "$need" -gt $((50 * 1048576)) ] && pass fit_base_need || fail fit_base_need "planned $need bytes"

# ---- several budgets below the need: both keys fit, under the limit, the same rows a step
for lim in 70MiB 60MiB 55MiB; do
  L=$(bytes $lim)
  for mode in batch.size=auto memory.fit=true; do
    name="fit_${lim}_${mode%%.*}"
    out="$TMP/run_${lim}_${mode%%.*}"
    run_trainer "$TMP/cls.lua" memory.limit=$lim $mode batch.effective=32 out="$out"
    expect_rc "${name}_rc" 0
    [ "$RC" = 0 ] || continue
    # batch.size = "auto" changes the micro-batch; memory.fit the fastest change that fits
    # (the micro-batch, or checkpointing)
    if [ "$mode" = batch.size=auto ]; then expect_err "${name}_prints" "changed batch.size"
    else expect_err "${name}_prints" "changed "; fi
    read -r peak loss b acc ck overrides <<<"$(facts "$out")"
    [ "$peak" -lt "$L" ] && pass "${name}_peak_under_limit" || fail "${name}_peak_under_limit" "peak_reserved $peak >= $L"
    [ $((b * acc)) = 32 ] && pass "${name}_effective" || fail "${name}_effective" "$b x $acc"
    case $overrides in *precision*) echo "SKIP ${name}_loss: it chose half precision ($overrides)" ;;
      *) close "$loss" "$BASE_LOSS" && pass "${name}_loss_exact" || fail "${name}_loss_exact" "$loss vs $BASE_LOSS ($overrides)" ;;
    esac
    [ "$overrides" != "-" ] && pass "${name}_summary_records" || fail "${name}_summary_records" "no fit in summary.json"
    if grep -q "^-- memory.fit chose: " "$out/resolved_recipe.lua"; then pass "${name}_resolved_records"
    else fail "${name}_resolved_records" "resolved_recipe.lua has no '-- memory.fit chose:' line"; fi
  done
done

# ---- checkpointing chosen (31 rows a step: no micro-batch but 1 divides them, and one row
# at a time is slower than the recompute): exact, as accumulation is
run_trainer "$TMP/cls.lua" batch.size=31 out="$TMP/base31"
read -r _ BASE31_LOSS _ <<<"$(facts "$TMP/base31")"
run_trainer "$TMP/cls.lua" batch.size=31 memory.limit=85MiB memory.fit=true out="$TMP/ck"
expect_rc fit_checkpoint_rc 0
if [ "$RC" = 0 ]; then
  read -r peak loss b acc ck overrides <<<"$(facts "$TMP/ck")"
  [ "$overrides" = 'checkpoint="auto"' ] && pass fit_checkpoint_chosen || fail fit_checkpoint_chosen "chose $overrides"
  [ "$peak" -lt "$(bytes 85MiB)" ] && pass fit_checkpoint_peak_under_limit || fail fit_checkpoint_peak_under_limit "$peak"
  close "$loss" "$BASE31_LOSS" && pass fit_checkpoint_loss_exact || fail fit_checkpoint_loss_exact "$loss vs $BASE31_LOSS"
fi

# ---- `trainer plan`: the choice a run makes, without running (batch.size = "auto" as the
# run, --fit as memory.fit = true)
run_trainer plan "$TMP/cls.lua" memory.limit=55MiB batch.size=auto batch.effective=32
expect_out fit_plan_auto_says "batch.size = \"auto\": the largest micro-batch within 55.00 MiB"
want=$(facts "$TMP/run_55MiB_batch" | awk '{print $6}' | tr ',' ' ')
expect_out fit_plan_auto_same_choice "add to the recipe, or after it on the command line: $want"
run_trainer plan "$TMP/cls.lua" memory.limit=55MiB batch.effective=32 --fit
expect_rc fit_plan_rc 0
expect_out fit_plan_flag_says "memory.fit: the recipe as written needs"
want=$(facts "$TMP/run_55MiB_memory" | awk '{print $6}' | tr ',' ' ')
expect_out fit_plan_flag_same_choice "add to the recipe, or after it on the command line: $want"
expect_no_out fit_plan_flag_no_ledger "tag                 bytes"

# ---- the plan's predicted step times: the recipe's, each checkpoint choice's, each alternative's
run_trainer plan "$TMP/cls.lua" --budget 60MiB
expect_out fit_plan_step_time "predicted step time: "
expect_out fit_plan_choice_time "step time"
if grep -E '^  batch\.size=.* \(fits; .*(% time|same time)\)$' "$TMP/out" >/dev/null; then pass fit_plan_alt_time
else fail fit_plan_alt_time "no alternative with its time"; show; fi
run_trainer plan "$TMP/cls.lua" --budget 60MiB --json
expect_out fit_plan_json_time '"predicted_step_s":'

# ---- nothing fits: exit 2 (out of memory), one paragraph naming the key and the fix
run_trainer "$TMP/cls.lua" memory.limit=30MiB memory.fit=true batch.size=auto out="$TMP/none"
expect_rc fit_none_rc 2
expect_err fit_none_names_key 'batch.size = "auto" and memory.fit = true: nothing fits the budget of 30.00 MiB'
expect_err fit_none_fix "Raise memory.limit"
[ ! -e "$TMP/none/metrics.jsonl" ] && pass fit_none_nothing_ran || fail fit_none_nothing_ran "it trained"

# ---- resume keeps the choice, even under another budget
src="$TMP/run_55MiB_batch"
before=$(facts "$src" | awk '{print $3, $4, $6}')
run_trainer resume "$src" steps=3 memory.limit=200MiB
expect_rc fit_resume_rc 0
after=$(facts "$src" | awk '{print $3, $4, $6}')
[ "$before" = "$after" ] && pass fit_resume_keeps || fail fit_resume_keeps "$before -> $after"
# the long form (the recipe again, resume=latest) too
run_trainer "$TMP/cls.lua" memory.limit=200MiB batch.size=auto batch.effective=32 out="$src" resume=latest steps=3
expect_rc fit_resume_long_rc 0
after=$(facts "$src" | awk '{print $3, $4, $6}')
[ "$before" = "$after" ] && pass fit_resume_long_keeps || fail fit_resume_long_keeps "$before -> $after"

# ---- MNRL: batch.size = "auto" keeps the batch whole with the cached loss, and says why
cat >"$TMP/mnrl.lua" <<EOF
return {
  steps = 1, seed = 3, device = "cpu", loss = { name = "mnrl" }, optim = { name = "adamw", lr = 1e-3 },
  log = { quiet = true, tensorboard = false }, eval = { at_start = false }, save = { final = false },
  model = { arch = "bert", init = "random", tokenizer = "$FX/emb", max_length = 64, dropout = 0,
    config = { hidden_size = 128, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 512,
    vocab_size = 500, max_position_embeddings = 512 } },
  data = { train = "$FX/long.jsonl", columns = { "sentence1", "sentence2" } },
}
EOF
run_trainer plan "$TMP/mnrl.lua" memory.limit=70MiB batch.size=auto batch.effective=32 --fit
expect_rc fit_mnrl_rc 0
expect_out fit_mnrl_cached "loss.cached=true"
expect_out fit_mnrl_reason "in-batch negatives"
expect_no_out fit_mnrl_no_split "batch.accumulate="

# ---- the CPU's rates: measured once, cached under TRAINER_CACHE_DIR
TRAINER_CPU_RATES= TRAINER_CACHE_DIR="$TMP/cache" run_trainer plan "$TMP/cls.lua"
expect_out fit_rates_measured "cached in $TMP/cache/cpu_rates.json"
[ -s "$TMP/cache/cpu_rates.json" ] && pass fit_rates_cache_file || fail fit_rates_cache_file "no cache file"
TRAINER_CPU_RATES=gflops=x run_trainer plan "$TMP/cls.lua"
expect_rc fit_rates_bad_rc 1
expect_err fit_rates_bad_says "TRAINER_CPU_RATES"
finish
