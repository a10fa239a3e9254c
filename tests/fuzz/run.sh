#!/usr/bin/env bash
# tests/fuzz/run.sh SECONDS [TARGET ...] — runs each libFuzzer target (build/fuzz/fuzz_TARGET,
# `make fuzz-build`) for SECONDS on its seed corpus and prints one line per target:
#   PASS fuzz_TARGET: N executions in S s (R/s), corpus C inputs, coverage F features
#   FAIL fuzz_TARGET: crashed on an input, saved as build/fuzz/crashes/TARGET-...
# The seeds are files of tests/data (the list below) plus tests/fuzz/corpus/TARGET/: seeds
# that tests/data lacks (an event file, a trainer_state) and the inputs that once crashed a
# target: after the fix, a crash input goes there so that every
# run, `make test`'s included, tries it again. New inputs found go to a temporary folder
# (FUZZ_KEEP=1: build/fuzz/work/TARGET, kept between runs).
set -u
cd "$(dirname "$0")/../.."
secs=${1:-5}; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors safetensors_index tokenizer_json vocab_txt json reader_jsonl reader_tsv reader_csv tfrecord trainer_state beir model_config)

# target: seed files (globs relative to the repository root), longest input tried
seeds() {
  case $1 in
    safetensors)       echo "tests/data/safetensors/golden.safetensors tests/data/tiny_lora_adapter/adapter_model.safetensors tests/data/lora_golden.safetensors tests/data/tiny_bert/model.safetensors" ;;
    safetensors_index) echo "tests/data/safetensors/sharded/model.safetensors.index.json" ;;
    tokenizer_json)    echo "tests/data/tiny_bert/tokenizer.json tests/data/tok_*/tokenizer.json" ;;
    vocab_txt)         echo "tests/data/tiny_bert/vocab.txt tests/data/tok_vocab_txt/vocab.txt" ;;
    json)              echo "tests/data/tiny_bert/config.json tests/data/tiny_bert_cls/config.json tests/data/*/tokenizer_config.json tests/data/tiny_lora_adapter/adapter_config.json tests/data/tiny_bert/modules.json tests/data/step_reads_golden.json tests/data/tok_scandi/tokenizer.json" ;;
    reader_jsonl)      echo "tests/data/data/*.jsonl tests/data/data/*.jsonl.gz" ;;
    reader_tsv)        echo "tests/data/data/*.tsv tests/data/golden_tiny_bert_cls_pairs.tsv" ;;
    reader_csv)        echo "tests/data/data/*.csv tests/data/data/*.tsv" ;;
    model_config)      echo "tests/data/*/config.json" ;;
    # an event file, a decompressed trainer_state of a tiny LoRA run, tests/data/ir_tiny's
    # three files end to end: tests/fuzz/corpus/
    tfrecord|trainer_state|beir) echo "" ;;
  esac
}
max_len() {
  case $1 in
    tokenizer_json) echo 65536 ;;
    safetensors) echo 16384 ;;
    *) echo 8192 ;;
  esac
}

mkdir -p build/fuzz/crashes
failed=0
for t in "${targets[@]}"; do
  bin=build/fuzz/fuzz_$t
  if [ ! -x "$bin" ]; then echo "FAIL fuzz_$t: $bin is not built (make fuzz-build)"; failed=1; continue; fi
  seed_dir=$(mktemp -d); work=$(mktemp -d)
  [ "${FUZZ_KEEP:-}" = 1 ] && { work=build/fuzz/work/$t; mkdir -p "$work"; }
  # shellcheck disable=SC2046
  for f in $(seeds "$t"); do [ -f "$f" ] && cp "$f" "$seed_dir/$(echo "$f" | tr / _)"; done
  [ -d "tests/fuzz/corpus/$t" ] && cp tests/fuzz/corpus/"$t"/* "$seed_dir/" 2>/dev/null
  # a target's dictionary of the words its format is made of (field names, keywords)
  dict=(); [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  log=$(mktemp)
  scratch=$(mktemp -d -p "$( [ -w /dev/shm ] && echo /dev/shm || echo /tmp )")
  FUZZ_TMPDIR=$scratch ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 -max_len="$(max_len "$t")" \
    -print_final_stats=1 -artifact_prefix="build/fuzz/crashes/$t-" "${dict[@]}" "$work" "$seed_dir" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corp=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ $rc -eq 0 ] && [ -n "$runs" ]; then
    rate=$(( ${runs:-0} / ( ${took:-$secs} > 0 ? ${took:-$secs} : 1 ) ))
    echo "PASS fuzz_$t: ${runs} executions in ${took:-$secs} s (${rate}/s), corpus ${corp:-?} inputs, coverage ${ft:-?} features"
  else
    echo "FAIL fuzz_$t: exit $rc; $(grep -m1 -o 'Test unit written to .*' "$log" || echo 'no crash input written')"
    grep -m1 -B2 -A25 'ERROR: \|fuzz contract broken\|runtime error' "$log" | head -40
    failed=1
  fi
  rm -rf "$seed_dir" "$log" "$scratch"
  [ "${FUZZ_KEEP:-}" = 1 ] || rm -rf "$work"
done
exit $failed
