#!/usr/bin/env bash
# `make demo`'s closing lines (scripts/demo_result.lua): both dev correlations, Spearman and
# Pearson, before and after, and the training loss at the start and the end; exit 1 naming
# what did not improve (the demo once printed only Spearman while Pearson fell).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

mkrun() { # dir, spearman before/after, pearson before/after, loss slope
  mkdir -p "$1"
  printf '{"steps": 20, "eval_start": {"spearman": %s, "pearson": %s}, "eval": {"spearman": %s, "pearson": %s}}\n' \
    "$2" "$4" "$3" "$5" >"$1/summary.json"
  : >"$1/metrics.jsonl"
  for i in $(seq 1 20); do
    printf '{"step": %d, "loss": %s}\n' "$i" "$(awk -v i="$i" -v k="$6" 'BEGIN { printf "%.4f", 5 + k * i + (i % 2) * 0.1 }')" \
      >>"$1/metrics.jsonl"
  done
}

mkrun "$TMP/good" 0.6889 0.7712 0.6835 0.7690 -0.1
run_trainer run scripts/demo_result.lua "$TMP/good" 123 "SweParaphrase dev"
expect_rc demo_good_rc 0
expect_out demo_prints_header "SweParaphrase dev, cosine similarity"
expect_out demo_prints_both_names "Spearman   Pearson"
expect_out demo_prints_before "before training:    0.6889    0.6835"
expect_out demo_prints_after "after  training:    0.7712    0.7690"
expect_out demo_prints_change "change:            +0.0823   +0.0855"
# first and last tenth (2 steps each) of 5 - 0.1 i + 0.1 (i odd)
expect_out demo_prints_loss "mean of the first and of the last 2 steps: 4.9000 -> 3.1000"
expect_out demo_prints_time "20 steps in 123 s"

# a run whose Spearman rose while its Pearson fell
mkrun "$TMP/pearson_fell" 0.8672 0.8727 0.8696 0.8674 -0.1
run_trainer run scripts/demo_result.lua "$TMP/pearson_fell" 99
expect_rc demo_pearson_fell_rc 1
expect_out demo_pearson_fell_printed "after  training:    0.8727    0.8674"
expect_out demo_pearson_fell_named "demo: the dev pearson did not improve"

mkrun "$TMP/flat" 0.5 0.6 0.5 0.6 0.0
run_trainer run scripts/demo_result.lua "$TMP/flat" 99
expect_rc demo_flat_loss_rc 1
expect_out demo_flat_loss_named "the training loss did not fall"

if grep -q "scripts/demo_result.lua" scripts/demo.sh; then pass demo_uses_printer; else fail demo_uses_printer "scripts/demo.sh does not print through scripts/demo_result.lua"; fi
finish
