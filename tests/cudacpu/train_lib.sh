# tests/cudacpu/train_lib.sh — what the training comparisons tests/cudacpu/train_*.sh share
# (sourced, not run). Each script trains the same recipe on device = "cpu" and device = "cuda"
# with one binary, TRAINER (default build/cudacpu/trainer: the CUDA backend on the CPU
# emulator, tools/cudacpu; on a machine with a GPU, TRAINER=./trainer runs the same checks on
# the card), and compares the runs' metrics.jsonl step by step (train_compare.lua).
#   names "a b c"       the checks this script reports (each SKIPped when no CUDA device)
#   need_cuda           SKIP every name and exit 0 without the binary or a CUDA device
#   fixture             the tiny models, data and recipes in $FX (train_fixture.lua), once
#   pair_recipes NAME EMB CLS   the fixture's two recipes on other model folders: $FX/NAME.lua
#                       (mnrl.lua on the folder EMB) and $FX/NAME_cls.lua (nli.lua on the
#                       classifier folder CLS); 6 steps, AdamW, dropout as the folders say, clip 1
#   train NAME ARGS...  $TRAINER ARGS... out=$W/runs/NAME --quiet; its output in NAME.log
#   drive NAME ARGS...  the same through train_run.lua (the scaler's test options)
#   compare A B SPEC    the runs A and B within SPEC (FIELD:TOL,...); prints the verdict line
#   parity NAME RUN SPEC RECIPE ARGS...  train RECIPE ARGS on the cpu (run RUN_cpu) and on cuda
#                       (RUN_cuda) and judge the cuda run against the cpu one within SPEC
#   FP32, BF16          the usual SPECs: every step's loss and clip norm within 1e-5 (fp32) or
#                       1e-2 (bf16) relative, the same lr and token counts
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
# shellcheck disable=SC2034  # the scripts that source this file use them
FP32="loss:1e-5,grad_norm:1e-5,lr:0,tokens:0" BF16="loss:1e-2,grad_norm:1e-2,lr:0,tokens:0"
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
  echo "return { extends = \"mnrl.lua\", model = { from = \"$2\" } }" >"$FX/$1.lua"
  echo "return { extends = \"nli.lua\", model = { from = \"$3\" } }" >"$FX/$1_cls.lua"
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

# The same recipe trained on both devices, then judged: parity NAME RUN SPEC RECIPE ARGS...
# (WHAT=... before the call labels the verdict, as judge's WHAT).
parity() {
  local name=$1 run=$2 spec=$3 recipe=$4 a b; shift 4
  train "${run}_cpu" "$recipe" device=cpu "$@"; a=$?
  train "${run}_cuda" "$recipe" device=cuda "$@"; b=$?
  judge "$name" "${run}_cuda" $b "${run}_cpu" $a "$spec" "${WHAT:-}"
}
