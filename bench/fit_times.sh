#!/usr/bin/env bash
# bench/fit_times.sh — the plan's predicted step time against the measured one, for the
# memory savings `trainer plan` offers, on the MiniLM-L6 and BERT-base shapes (random
# weights: the time does not depend on them), MNRL on pairs, fp32, on this machine's CPU.
#   bash bench/fit_times.sh [OUT_DIR]      (a few minutes on 2 cores)
# For each shape and each change (as written, checkpoint="auto", half the micro-batch with
# twice the accumulation, the cached loss with half the texts at once, bf16),
# bench/fit_times.lua measures a step (the median of STEPS, in CPU time over the threads;
# every batch is max_length tokens long) and the plan's predicted_step_s. Prints one table per
# shape, in measured order, and whether the predicted order is the same.
set -u
cd "$(dirname "$0")/.." || exit 1
TRAINER=${TRAINER:-./trainer}
W=${1:-build/fit_times}
STEPS=${STEPS:-3}
THREADS=$("$TRAINER" run <(echo 'print(require("trainer.plan.time").cpu_threads())'))
rm -rf "$W"; mkdir -p "$W"
case $W in /*) ;; *) W="$(pwd)/$W" ;; esac
"$TRAINER" run tests/cudacpu/train_fixture.lua "$W/fx" >/dev/null || { echo "fixture failed"; exit 1; }

recipe() { # NAME PRESET ROWS
  cat >"$W/$1.lua" <<EOF
return {
  model = { arch = "bert", config = "$2", init = "random", tokenizer = "$W/fx/emb", max_length = 32, dropout = 0 },
  data = { train = "$W/fx/long.jsonl", columns = { "sentence1", "sentence2" } },
  loss = { name = "mnrl" }, optim = { name = "adamw", lr = 1e-4 }, batch = { size = $3 }, steps = $STEPS,
  log = { every = 1, quiet = true, tensorboard = false }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3,
}
EOF
}

shape() { # NAME PRESET ROWS
  local name=$1 rows=$3
  recipe "$name" "$2" "$rows"
  local half=$((rows / 2)) texts=$((rows * 2 / 2))
  printf '%s\n' "as-written|" "checkpoint-auto|checkpoint=\"auto\"" \
    "accumulate-2|batch.size=$half batch.accumulate=2" "cached|loss.cached=true loss.mini_batch=$texts" \
    "bf16|precision=bf16" >"$W/$name.configs"
  local configs=()
  while IFS= read -r line; do configs+=("$line"); done <"$W/$name.configs"
  "$TRAINER" run bench/fit_times.lua "$W/$name.lua" "$STEPS" "${configs[@]}" >"$W/$name.rows" 2>"$W/$name.err" || {
    echo "FAIL $name: $(tail -n 3 "$W/$name.err")"; return; }
  echo "== $name ($2, $rows rows x 2 texts x 32 tokens, fp32 unless said; seconds per optimizer step, CPU time / $THREADS)"
  printf '%-18s %10s %10s\n' change measured predicted
  sort -k2 -g "$W/$name.rows" | while read -r l m p; do printf '%-18s %10.3f %10.3f\n' "$l" "$m" "$p"; done
  local mo po
  mo=$(sort -k2 -g "$W/$name.rows" | awk '{print $1}' | tr '\n' ' ')
  po=$(sort -k3 -g "$W/$name.rows" | awk '{print $1}' | tr '\n' ' ')
  echo "measured order:  $mo"
  echo "predicted order: $po"
  [ "$mo" = "$po" ] && echo "same order" || echo "orders differ"
}

shape minilm minilm-l6 "${MINILM_ROWS:-16}"
shape bertbase bert-base "${BERT_ROWS:-4}"
