#!/usr/bin/env bash
# tests/cudacpu/train_infer.sh — the inference commands with --device cuda against --device cpu
# (one binary, TRAINER; tests/cudacpu/train_lib.sh), on the fixture's tiny models, 40 lines in
# batches of 16 (by_length: padded batches of mixed lengths, the last one short):
#   train_encode_cuda     `trainer encode`: every embedding element within 1e-5 of the CPU's,
#                         relative to the row's largest (fp32 forward, sums in another order;
#                         the CPU skips the padding rows, the device computes them masked);
#   train_classify_cuda   `trainer classify` on TAB pairs: the same labels, every probability
#                         within 1e-5 absolute;
#   infer_bad_ids_*       a model whose embedding has fewer rows than its tokenizer has ids
#                         (small_vocab_model.lua): `trainer encode` and `classify` exit 1 on
#                         both devices with the embedding's error naming the id and its
#                         position, and print nothing (on cuda the ids are checked by a kernel).
set -u
. "$(dirname "$0")/train_lib.sh"
names "train_encode_cuda train_classify_cuda infer_bad_ids_encode_cpu infer_bad_ids_encode_cuda infer_bad_ids_classify_cpu infer_bad_ids_classify_cuda"
need_cuda
fixture

infer() { # NAME KIND MODEL FILE DEVICE -> $W/NAME.out, the status
  "$TRAINER" "$2" "$3" "$4" --batch 16 --device "$5" >"$W/$1.out" 2>"$W/$1.err"
}
check() { # NAME KIND CUDA_RUN rc CPU_RUN rc TOL
  local why
  if [ "$4" != 0 ]; then fail "$1" "the cuda run failed (rc $4): $(tail -n 2 "$W/$3.err" | tr '\n' ' ')"
  elif [ "$6" != 0 ]; then fail "$1" "the cpu run failed (rc $6): $(tail -n 2 "$W/$5.err" | tr '\n' ' ')"
  elif why=$("$TRAINER" run tests/cudacpu/infer_compare.lua "$2" "$W/$3.out" "$W/$5.out" "$7" 2>&1); then pass "$1" "$why"
  else fail "$1" "$why"; fi
}
infer enc_cpu encode "$FX/emb" "$FX/texts.txt" cpu; a=$?
infer enc_cuda encode "$FX/emb" "$FX/texts.txt" cuda; b=$?
check train_encode_cuda encode enc_cuda $b enc_cpu $a 1e-5
infer cls_cpu classify "$FX/cls" "$FX/pairs.tsv" cpu; a=$?
infer cls_cuda classify "$FX/cls" "$FX/pairs.tsv" cuda; b=$?
check train_classify_cuda classify cls_cuda $b cls_cpu $a 1e-5

bad_ids() { # KIND TASK INPUT
  local dev rc name
  if ! "$TRAINER" run tests/cudacpu/small_vocab_model.lua "$W/small_$1" "$2" >"$W/small_$1.log" 2>&1; then
    fail "infer_bad_ids_$1_cpu" "small_vocab_model.lua: $(tail -n 2 "$W/small_$1.log" | tr '\n' ' ')"
    return
  fi
  for dev in cpu cuda; do
    name=infer_bad_ids_$1_$dev
    infer "bad_$1_$dev" "$1" "$W/small_$1" "$3" "$dev"; rc=$?
    if [ "$rc" != 1 ]; then fail "$name" "exit $rc, expected 1"
    elif [ -s "$W/bad_$1_$dev.out" ]; then fail "$name" "it printed $(wc -l <"$W/bad_$1_$dev.out") lines"
    elif ! grep -q "embedding: id [0-9]* at position [0-9]* is outside the vocabulary of 5 rows" "$W/bad_$1_$dev.err"; then
      fail "$name" "no id error: $(head -c 300 "$W/bad_$1_$dev.err")"
    else pass "$name"; fi
  done
}
bad_ids encode embedding "$FX/texts.txt"
bad_ids classify classification "$FX/pairs.tsv"
finish
