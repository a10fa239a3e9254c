#!/usr/bin/env bash
# `trainer tokenize` on the byte-level BPE folders (tests/data/tok_roberta, tok_modernbert,
# made by tests/ref/make_bpe_golden.py): the ids Hugging Face `tokenizers` gives, with the
# folder's specials (<s> </s>, [CLS] [SEP]) and truncation by --max-length. Before BPE was
# read, these folders were refused ("model type BPE is not supported").
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
printf '%s\n' 'Hello, world!' \
  'Blåbär, smörgås och ärtsoppa. Æble, ø og å. Kjøtt og brød på Østlandet. ÅÄÖ ÆØÅ' >"$TMP/in.txt"

run_trainer tokenize tests/data/tok_roberta "$TMP/in.txt"
expect_rc tokenize_roberta_rc 0
expect_out tokenize_roberta_ascii '[0,43,528,82,15,306,292,556,4,2]'
expect_out tokenize_roberta_scandinavian '[0,37,79,268,69,291,15,516,288,74,268,86,312,332,823,602,68,17,224,131,232,69,353,15,224,131,120,287,74,507,17,768,77,131,120,271,287,74,495,131,120,71,309,224,131,250,293,79,324,280,17,224,131,231,131,230,131,248,224,131,232,131,250,131,231,2]'

run_trainer tokenize tests/data/tok_modernbert "$TMP/in.txt" --max-length 10
expect_rc tokenize_modernbert_rc 0
expect_out tokenize_modernbert_truncated '[905,35,77,266,67,289,13,514,286,906]'
if [ "$(echo "$OUT" | wc -l)" = 2 ]; then pass tokenize_modernbert_one_line_per_input; else fail tokenize_modernbert_one_line_per_input "$OUT"; fi

# a BPE file the loader refuses names the file and the key
mkdir -p "$TMP/dropout"
sed 's/"dropout": null/"dropout": 0.1/' tests/data/tok_roberta/tokenizer.json >"$TMP/dropout/tokenizer.json"
run_trainer tokenize "$TMP/dropout" "$TMP/in.txt"
expect_rc tokenize_bpe_dropout_rc 1
expect_err tokenize_bpe_dropout_named "$TMP/dropout/tokenizer.json: model.dropout is 0.1"

finish
