#!/usr/bin/env bash
# Puts the NLI data the flagship and classifier recipes name into data/, from the shared
# data collection beside the project (../shared/data, or $TRAINER_SHARED_DATA):
#   data/scandi_nli.jsonl.gz  <- SweNLI dev (Swedish, CC BY 4.0)   recipes/scandi_lora.lua
#   data/nli_train.jsonl.gz   <- SNLI 1.0 dev (CC BY-SA 4.0)       recipes/nli_classifier.lua
#   data/nli_eval.jsonl.gz    <- SICK trial (CC BY-NC-SA 3.0)      recipes/nli_classifier.lua
# These files are not committed (licences and size); the STS-B files the demo uses are.
# Records: {"premise": ..., "hypothesis": ..., "label": "entailment"|"neutral"|"contradiction"}.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${TRAINER_SHARED_DATA:-../shared/data}
if [ ! -d "$src" ]; then
  cat >&2 <<MSG
prepare_nli_data: no shared data collection at $src.
Get NLI data as gzip JSON lines with premise, hypothesis and label fields, for example:
  SweNLI (SuperLim 2, Sprakbanken Text): https://spraakbanken.gu.se/en/resources/superlim
  SNLI 1.0: https://nlp.stanford.edu/projects/snli/
and save them as data/scandi_nli.jsonl.gz, data/nli_train.jsonl.gz and data/nli_eval.jsonl.gz,
or set TRAINER_SHARED_DATA to a folder holding swenli_dev, snli_dev and sick_dev .jsonl.gz files.
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
copy swenli_dev.jsonl.gz data/scandi_nli.jsonl.gz
copy snli_dev.jsonl.gz data/nli_train.jsonl.gz
copy sick_dev.jsonl.gz data/nli_eval.jsonl.gz
