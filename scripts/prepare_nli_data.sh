#!/usr/bin/env bash
# Puts the NLI data the classifier recipe names into data/, from the shared
# data collection beside the project (../shared/data, or $TRAINER_SHARED_DATA):
#   data/nli_train.jsonl.gz   <- SNLI 1.0 dev (CC BY-SA 4.0)       recipes/nli_classifier.lua
#   data/nli_eval.jsonl.gz    <- SICK trial (CC BY-NC-SA 3.0)      recipes/nli_classifier.lua
# These files are not committed (licences and size); the STS-B files the demo uses are, and
# so is the flagship's SweNLI dev file (data/swenli_dev.jsonl.gz, CC BY 4.0).
# Records: {"premise": ..., "hypothesis": ..., "label": "entailment"|"neutral"|"contradiction"}.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${TRAINER_SHARED_DATA:-../shared/data}
if [ ! -d "$src" ]; then
  cat >&2 <<MSG
prepare_nli_data: no shared data collection at $src.
Get NLI data as gzip JSON lines with premise, hypothesis and label fields, for example:
  SNLI 1.0: https://nlp.stanford.edu/projects/snli/
and save them as data/nli_train.jsonl.gz and data/nli_eval.jsonl.gz,
or set TRAINER_SHARED_DATA to a folder holding snli_dev and sick_dev .jsonl.gz files.
MSG
  exit 1
fi
mkdir -p data
copy() { # source name, target
  if [ -f "$2" ]; then echo "prepare_nli_data: $2 is there"; return; fi
  if [ ! -f "$src/$1" ]; then echo "prepare_nli_data: $src/$1 not found" >&2; return 1; fi
  cp "$src/$1" "$2.tmp" && mv "$2.tmp" "$2"
  echo "prepare_nli_data: $2 <- $src/$1"
}
copy snli_dev.jsonl.gz data/nli_train.jsonl.gz
copy sick_dev.jsonl.gz data/nli_eval.jsonl.gz
