#!/usr/bin/env bash
# Makes the NLI classifier's training and evaluation files (recipes/nli_classifier.lua)
# from the SweNLI dev file that ships in data/ (SuperLim 2, CC BY 4.0; data/README.md):
#   data/nli_train.jsonl.gz   nine premises in ten, with all their pairs (about 8,800 pairs)
#   data/nli_eval.jsonl.gz    the tenth premise of every ten, held out (about 1,000 pairs)
# A premise's pairs all go to one side, so no evaluation premise is seen in training.
# Records: {"premise": ..., "hypothesis": ..., "label": "entailment"|"neutral"|"contradiction"}.
#   scripts/prepare_nli_data.sh [OUT_DIR]      (default: data/ of this checkout)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dst=${1:-$root/data}
src=$root/data/swenli_dev.jsonl.gz
if [ ! -f "$src" ]; then
  echo "prepare_nli_data: $src is missing; it ships with the project: git checkout data/swenli_dev.jsonl.gz" >&2
  exit 1
fi
mkdir -p "$dst"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the premise's JSON string is the key; the n-th distinct premise goes to eval when n % 10 == 0
gzip -dc "$src" | awk -v train="$tmp/train" -v eval="$tmp/eval" '
  {
    key = $0
    if (match(key, /"premise": "([^"\\]|\\.)*"/)) key = substr(key, RSTART, RLENGTH)
    if (!(key in side)) { n++; side[key] = (n % 10 == 0) ? eval : train }
    print > side[key]
  }'
for f in train eval; do
  gzip -n -9 -c "$tmp/$f" >"$dst/nli_$f.jsonl.gz.tmp"
  mv "$dst/nli_$f.jsonl.gz.tmp" "$dst/nli_$f.jsonl.gz"
  echo "prepare_nli_data: $dst/nli_$f.jsonl.gz: $(wc -l <"$tmp/$f") pairs from $src"
done
