#!/usr/bin/env bash
# The retrieval demo (recipes/minilm_retrieval.lua): all-MiniLM-L6-v2 into models/, the SweNLI
# retrieval task built from data/swenli_dev.jsonl.gz, hard negatives mined with `trainer mine`,
# MNRL training, and NDCG@10 (with MRR@10, Recall@10, Accuracy@1) on the held-out premises
# before and after, through scripts/retrieval_result.lua. Extra arguments go to the training
# run (key=value overrides). Exit status: retrieval_result.lua's (0 when NDCG@10 rose).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=runs/minilm_retrieval
IR=build/swenli_ir
echo "== retrieval 1/4: all-MiniLM-L6-v2 into models/"
bash scripts/fetch_minilm.sh
echo "== retrieval 2/4: the SweNLI retrieval task into $IR"
./trainer run scripts/make_swenli_ir.lua "$IR"
echo "== retrieval 3/4: hard negatives for the training pairs"
./trainer mine models/all-MiniLM-L6-v2 "$IR/train_pairs.jsonl" --corpus "$IR/train_corpus.txt" \
  --num-negatives 1 --range-max 40 --relative-margin 0.05 --batch 64 --out "$IR/train_triplets.jsonl"
echo "== retrieval 4/4: train recipes/minilm_retrieval.lua"
rm -rf "$OUT"
start=$(date +%s)
./trainer recipes/minilm_retrieval.lua out="$OUT" "$@"
secs=$(( $(date +%s) - start ))
./trainer run scripts/retrieval_result.lua "$OUT" "$secs"
