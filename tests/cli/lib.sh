# lib.sh — helpers for the end-to-end CLI tests. Each `expect_*` prints one PASS/FAIL line.
#   run_trainer ARGS...        runs ./trainer, keeping stdout in $OUT, stderr in $ERR, status in $RC
#   expect_rc NAME CODE        the last run exited with CODE
#   expect_out NAME TEXT       stdout contains TEXT (fixed string)
#   expect_err NAME TEXT       stderr contains TEXT (fixed string)
#   train NAME RECIPE [k=v...] a run into $TMP/NAME: its exit status 0 and a finite last loss
#   keys FILE                  the tensor names of a safetensors file, sorted, one a line
#   check NAME MODE ARGS...    tests/cli/check_outputs.lua's comparison against a golden
#   check_out RC_NAME NAME MODE GOLDEN ARGS...  after run_trainer: its exit status 0 (RC_NAME)
#                              and its stdout against GOLDEN (check NAME MODE)
#   lora_default_targets NAME RUN TARGET  train RUN: $TMP/emb.lua in bf16, checkpointing every
#                              layer, LoRA r 4 on the family's default targets; its adapter config
#                              (checkpoint-4) names TARGET (the check NAME)
#   encodes NAME CHECKPOINT TEXTS  `trainer encode` of TEXTS on CHECKPOINT exits 0 (NAME_encodes)
#   classifies NAME CHECKPOINT `trainer classify` of the golden pairs (tests/data) on CHECKPOINT:
#                              exit status 0 (NAME_classifies), rows with a label (NAME_labels)
#   pair_recipes EMB CLS       the training fixture's pairs in $TMP/fx and two recipes of 4
#                              steps on them: $TMP/emb.lua (model folder EMB, MNRL) and
#                              $TMP/cls.lua (the classifier folder CLS, cross-entropy)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TRAINER="$ROOT/trainer"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
failures=0

run_trainer() {
  "$TRAINER" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
}
run_trainer_stdin() { # input, args...
  local input=$1; shift
  printf '%s' "$input" | "$TRAINER" "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
}
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
show() { printf '  rc=%s\n  stdout: %s\n  stderr: %s\n' "$RC" "$(echo "$OUT" | head -c 600)" "$(echo "$ERR" | head -c 600)"; }
expect_rc()  { if [ "$RC" = "$2" ]; then pass "$1"; else fail "$1" "exit $RC, expected $2"; show; fi; }
expect_out() { if grep -qF -- "$2" "$TMP/out"; then pass "$1"; else fail "$1" "stdout lacks '$2'"; show; fi; }
expect_err() { if grep -qF -- "$2" "$TMP/err"; then pass "$1"; else fail "$1" "stderr lacks '$2'"; show; fi; }
expect_no_out() { if grep -qF -- "$2" "$TMP/out"; then fail "$1" "stdout has '$2'"; show; else pass "$1"; fi; }
finish() { [ "$failures" -eq 0 ]; }

train() { # NAME RECIPE overrides...
  local name=$1 recipe=$2 last; shift 2
  run_trainer "$recipe" out="$TMP/$name" "$@"
  expect_rc "${name}_rc" 0
  last=$(tail -n 1 "$TMP/$name/metrics.jsonl" 2>/dev/null | sed -E 's/.*"loss": ?([-0-9.e+]+).*/\1/')
  if awk -v l="$last" 'BEGIN { exit !(l + 0 == l && l > 0 && l < 100) }'; then pass "${name}_loss_finite"
  else fail "${name}_loss_finite" "last loss '$last'"; fi
}
keys() {
  "$TRAINER" run /dev/stdin <<LUA
local r = require("trainer.core.safetensors").load("$1")
local n = r:names()
table.sort(n)
print(table.concat(n, "\n"))
r:close()
LUA
}
check() { # name, mode, args...
  local name=$1; shift
  if "$TRAINER" run tests/cli/check_outputs.lua "$@" >"$TMP/check" 2>&1; then pass "$name"
  else fail "$name" "$(tail -3 "$TMP/check")"; fi
}
check_out() { # rc name, name, mode, golden, args...
  local rc_name=$1 name=$2 mode=$3; shift 3
  expect_rc "$rc_name" 0
  echo "$OUT" >"$TMP/$name.out"
  check "$name" "$mode" "$TMP/$name.out" "$@"
}
lora_default_targets() { # name, run, target
  train "$2" "$TMP/emb.lua" precision=bf16 'checkpoint={every=1}' 'lora={r=4,alpha=8,dropout=0.1}'
  if grep -q "\"$3\"" "$TMP/$2/checkpoint-4/adapter_config.json" 2>/dev/null; then pass "$1"
  else fail "$1" "no $3 in adapter_config.json"; fi
}
encodes() { # name, checkpoint folder, texts file
  run_trainer encode "$2" "$3"
  expect_rc "$1_encodes" 0
}
classifies() { # name, checkpoint folder
  run_trainer classify "$2" "$ROOT/tests/data/golden_tiny_bert_cls_pairs.tsv"
  expect_rc "$1_classifies" 0
  expect_out "$1_labels" '"label":'
}
pair_recipes() { # EMB_FOLDER CLS_FOLDER
  run_trainer run "$ROOT/tests/cudacpu/train_fixture.lua" "$TMP/fx"
  expect_rc fixture_rc 0
  cat >"$TMP/emb.lua" <<LUA
return {
  model = { from = "$1" }, data = { train = "$TMP/fx/pairs.jsonl", columns = { "sentence1", "sentence2" } },
  loss = { name = "mnrl" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 4,
  grad_clip = 1.0, log = { every = 1, quiet = true }, eval = { at_start = false }, device = "cpu", seed = 3,
}
LUA
  cat >"$TMP/cls.lua" <<LUA
return {
  model = { from = "$2", task = "classification" },
  data = { train = "$TMP/fx/pairs.jsonl", columns = { "sentence1", "sentence2", "label" } },
  loss = { name = "cross_entropy" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 4,
  grad_clip = 1.0, log = { every = 1, quiet = true }, eval = { at_start = false }, device = "cpu", seed = 3,
}
LUA
}
