# tests/cudacpu/train_lib.sh — what the training comparisons tests/cudacpu/train_*.sh share
# (sourced, not run). Each script trains the same recipe on device = "cpu" and device = "cuda"
# with one binary, TRAINER (default build/cudacpu/trainer: the CUDA backend on the CPU
# emulator, tools/cudacpu; on a machine with a GPU, TRAINER=./trainer runs the same checks on
# the card), and compares the runs' metrics.jsonl step by step (train_compare.lua).
#   names "a b c"       the checks this script reports (each SKIPped when no CUDA device)
#   need_cuda           SKIP every name and exit 0 without the binary or a CUDA device
#   fixture             the tiny models, data and recipes in $FX (train_fixture.lua), once
#   pair_recipes NAME EMB CLS   two recipes of 6 steps on the fixture's pairs: $FX/NAME.lua
#                       (the model folder EMB, MNRL) and $FX/NAME_cls.lua (the classifier
#                       folder CLS, cross-entropy); AdamW, dropout as the folders say, clip 1
#   train NAME ARGS...  $TRAINER ARGS... out=$W/runs/NAME --quiet; its output in NAME.log
#   drive NAME ARGS...  the same through train_run.lua (the scaler's test options)
#   compare A B SPEC    the runs A and B within SPEC (FIELD:TOL,...); prints the verdict line
#   plan_check NAME RUN RECIPE ARGS...  `trainer plan RECIPE device=cuda ARGS --json` against the
#                       ledger of the cuda run RUN of the same recipe (plan_compare.lua)
#   pass/fail/skip NAME [WHY], finish: the PASS/FAIL/SKIP lines, "N passed, N failed", the status
# Output goes under OUT (default build/cudacpu_out)/<script name>/.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
TRAINER=${TRAINER:-build/cudacpu/trainer}
W="${OUT:-build/cudacpu_out}/$(basename "$0" .sh)"
case $W in /*) ;; *) W="$(pwd)/$W" ;; esac   # the recipes name files by absolute path
FX="$W/fx"
passed=0; failed=0; NAMES=""
rm -rf "$W"; mkdir -p "$W/runs"

names() { NAMES="$1"; }
pass() { echo "PASS $1${2:+ ($2)}"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
skip() { echo "SKIP $1: $2"; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" = 0 ]; exit; }

need_cuda() {
  local why="" n
  if [ ! -x "$TRAINER" ]; then why="no $TRAINER (make cudacpu builds it)"
  else
    n=$("$TRAINER" run <(echo 'print(tonumber(require("trainer.core.ffi").tr_cuda_device_count()))') 2>/dev/null)
    [ "${n:-0}" -gt 0 ] 2>/dev/null || why="no CUDA device visible to $TRAINER"
  fi
  if [ -n "$why" ]; then
    for n in $NAMES; do skip "$n" "$why"; done
    finish
  fi
}

fixture() { "$TRAINER" run tests/cudacpu/train_fixture.lua "$FX" >"$W/fixture.log" 2>&1 || {
  echo "FAIL fixture: $(tail -n 3 "$W/fixture.log")"; failed=$((failed + 1)); finish; }; }

pair_recipes() { # NAME EMB_FOLDER CLS_FOLDER
  cat >"$FX/$1.lua" <<LUA
return {
  model = { from = "$2" }, data = { train = "$FX/pairs.jsonl", columns = { "sentence1", "sentence2" } },
  loss = { name = "mnrl" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 6,
  grad_clip = 1.0, log = { every = 4, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3,
}
LUA
  cat >"$FX/$1_cls.lua" <<LUA
return {
  model = { from = "$3", task = "classification" },
  data = { train = "$FX/pairs.jsonl", columns = { "sentence1", "sentence2", "label" } },
  loss = { name = "cross_entropy" }, optim = { name = "adamw", lr = 1e-3 }, batch = { size = 8 }, steps = 6,
  grad_clip = 1.0, log = { every = 4, quiet = true }, eval = { at_start = false }, save = { final = false },
  device = "cpu", seed = 3,
}
LUA
}

train() { local n=$1; shift; "$TRAINER" "$@" out="$W/runs/$n" --quiet >"$W/runs/$n.log" 2>&1; }
drive() { local n=$1; shift
  "$TRAINER" run tests/cudacpu/train_run.lua "$@" out="$W/runs/$n" >"$W/runs/$n.log" 2>&1; }
compare() { "$TRAINER" run tests/cudacpu/train_compare.lua "$W/runs/$1" "$W/runs/$2" "$3" 2>&1; }

plan_check() { # NAME RUN RECIPE overrides...
  local name=$1 run=$2 recipe=$3 why rc; shift 3
  "$TRAINER" plan "$recipe" device=cuda "$@" --json >"$W/$run.plan.json" 2>"$W/$run.plan.err" || {
    fail "$name" "trainer plan failed: $(tail -n 2 "$W/$run.plan.err" | tr '\n' ' ')"; return; }
  train "$run" "$recipe" device=cuda "$@"; rc=$?
  if [ $rc != 0 ]; then fail "$name" "the cuda run failed (rc $rc): $(tail -n 2 "$W/runs/$run.log" | tr '\n' ' ')"
  elif why=$("$TRAINER" run tests/cudacpu/plan_compare.lua "$W/$run.plan.json" "$W/runs/$run" 2>&1); then pass "$name" "$why"
  else fail "$name" "$why"; fi
}

# The verdict of a check that compares run A (cuda) with run B (reference) after both trained:
#   judge NAME A rcA B rcB SPEC [WHAT]
judge() {
  local name=$1 a=$2 rca=$3 b=$4 rcb=$5 spec=$6 what=${7:-} why
  if [ "$rca" != 0 ]; then fail "$name" "the $a run failed (rc $rca): $(tail -n 2 "$W/runs/$a.log" | tr '\n' ' ')"
  elif [ "$rcb" != 0 ]; then fail "$name" "the $b run failed (rc $rcb): $(tail -n 2 "$W/runs/$b.log" | tr '\n' ' ')"
  elif why=$(compare "$a" "$b" "$spec"); then pass "$name" "${what:+$what; }$why"
  else fail "$name" "${what:+$what: }$why"; fi
}
