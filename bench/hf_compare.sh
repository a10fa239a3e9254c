#!/usr/bin/env bash
# Tokenizer and encoder, trainer against Hugging Face tokenizers and sentence-transformers,
# on the same machine in the same run: throughput (sentences/s) and agreement (identical ids,
# cosine of embeddings). A benchmark: it measures and prints, it asserts nothing.
#
#   bench/hf_compare.sh [TEXTS.txt] [N]
#   PYTHON=/path/to/python  a Python with `tokenizers` and `sentence-transformers` (optional:
#                           without them only trainer's side is measured)
# Default texts: SICK test premises from ../shared/data (not in this repository).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=models/all-MiniLM-L6-v2
N=${2:-2000}
PY=${PYTHON:-python3}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
[ -f "$MODEL/model.safetensors" ] || bash scripts/fetch_minilm.sh >/dev/null
if [ -n "${1:-}" ]; then head -n "$N" "$1" >"$work/texts.txt"
else
  zcat ../shared/data/sick_test.jsonl.gz | head -n "$N" |
    sed -e 's/^{"premise": "//' -e 's/", "hypothesis".*$//' -e 's/\\"/"/g' >"$work/texts.txt" || true
fi
n=$(wc -l <"$work/texts.txt")

./trainer tokenize "$MODEL" "$work/texts.txt" >"$work/ids_trainer.txt"
./trainer encode "$MODEL" "$work/texts.txt" --batch 32 >"$work/emb_trainer.txt"
read -r tok_trainer enc_trainer <<<"$(./trainer run bench/encode_throughput.lua "$MODEL" "$work/texts.txt" 32)"

hf=$("$PY" - "$MODEL" "$work" <<'PY' 2>/dev/null || echo "unavailable"
import json, sys, time
model, work = sys.argv[1], sys.argv[2]
texts = open(f"{work}/texts.txt", encoding="utf-8").read().split("\n")[:-1]
from tokenizers import Tokenizer
tok = Tokenizer.from_file(f"{model}/tokenizer.json")
tok.no_truncation(); tok.no_padding()
t0 = time.time(); enc = [tok.encode(t) for t in texts]; t1 = time.time()
ours = [json.loads(l) for l in open(f"{work}/ids_trainer.txt")]
same = sum(1 for a, b in zip(ours, enc) if a == b.ids)
from sentence_transformers import SentenceTransformer
import numpy as np
st = SentenceTransformer(model, device="cpu")
t2 = time.time(); emb = st.encode(texts, batch_size=32); t3 = time.time()
mine = np.array([json.loads(l) for l in open(f"{work}/emb_trainer.txt")], dtype=np.float64)
e = emb.astype(np.float64)
cos = (mine * e).sum(1) / np.linalg.norm(mine, axis=1) / np.linalg.norm(e, axis=1)
print(f"{len(texts)/(t1-t0):.0f} {same} {len(texts)/(t3-t2):.0f} {cos.min():.7f} {np.abs(mine-e).max():.2e}")
PY
)
echo "texts: $n ($( [ -n "${1:-}" ] && echo "$1" || echo "SICK test premises, not in the repository"))"
printf '%-34s %14s %14s\n' "" "trainer" "Hugging Face"
if [ "$hf" = "unavailable" ]; then
  printf '%-34s %14s %14s\n' "tokenize, sentences/s" "$tok_trainer" "n/a"
  printf '%-34s %14s %14s\n' "encode (batch 32), sentences/s" "$enc_trainer" "n/a"
  echo "(no Python with tokenizers and sentence-transformers: set PYTHON=...)"
else
  read -r tok_hf same enc_hf cosmin maxabs <<<"$hf"
  printf '%-34s %14s %14s\n' "tokenize, sentences/s" "$tok_trainer" "$tok_hf"
  printf '%-34s %14s %14s\n' "encode (batch 32), sentences/s" "$enc_trainer" "$enc_hf"
  echo "identical token ids: $same of $n; embedding cosine min $cosmin, max abs difference $maxabs"
fi
echo "(both sides timed in-process, model load excluded; tokenize one text at a time, encode in"
echo " length-sorted batches of 32, as sentence-transformers does; threads: OMP_NUM_THREADS / torch defaults)"
