#!/usr/bin/env bash
# Write failures: a run whose output folder cannot take a write exits 1
# with a message naming the file and the free space, and no file or checkpoint folder
# under its final name is ever half-written (no *.tmp left behind either).
#   1. injected: TRAINER_FAIL_WRITE=TEXT makes every write to a path containing TEXT fail
#      as on a full disk (summary.json, resolved_recipe.lua, trainer_state, model.safetensors);
#   1b. a file-size limit (ulimit -f) that stops metrics.jsonl late in a run, once the JIT
#      has compiled its writer (where LuaJIT once turned a failed flush into a success);
#   2. a real full disk: a small tmpfs (skipped with a SKIP line where mount is not
#      permitted), filled up by the recipe's hook in the middle of the run, and one too
#      small for the first checkpoint.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_fixtures.sh"
cd "$ROOT"

# Every line of a metrics.jsonl is whole JSON and the file ends with a newline.
cat >"$TMP/whole.lua" <<'EOF'
local path = arg[1]
local f = assert(io.open(path, "rb")) local text = f:read("*a") f:close()
assert(text == "" or text:sub(-1) == "\n", path .. " does not end with a newline")
local n = 0
for line in text:gmatch("([^\n]*)\n") do require("trainer.core.json").decode(line, path) n = n + 1 end
print(("%d whole lines"):format(n))
EOF
no_tmp_left() { # name, folder
  if find "$2" -name '*.tmp' | grep -q .; then fail "$1" "$(find "$2" -name '*.tmp')"; else pass "$1"; fi
}

# ---- 1. injected failures
TRAINER_FAIL_WRITE=summary.json run_trainer "$TMP/plain.lua" steps=3 out="$TMP/runs/w_summary" --quiet
expect_rc summary_fail_rc 1
expect_err summary_fail_names_file "$TMP/runs/w_summary/summary.json: cannot write (No space left on device"
expect_err summary_fail_free_space "free on the file system of $TMP/runs/w_summary"
if [ -e "$TMP/runs/w_summary/summary.json" ]; then fail summary_fail_no_file "summary.json exists"; else pass summary_fail_no_file; fi
no_tmp_left summary_fail_no_tmp "$TMP/runs/w_summary"
run_trainer run "$TMP/whole.lua" "$TMP/runs/w_summary/metrics.jsonl"
expect_out summary_fail_metrics_whole "3 whole lines"

TRAINER_FAIL_WRITE=resolved_recipe.lua run_trainer "$TMP/plain.lua" out="$TMP/runs/w_recipe" --quiet
expect_rc recipe_fail_rc 1
expect_err recipe_fail_names_file "$TMP/runs/w_recipe/resolved_recipe.lua: cannot write"
if [ -e "$TMP/runs/w_recipe/resolved_recipe.lua" ]; then fail recipe_fail_no_file "exists"; else pass recipe_fail_no_file; fi

for f in trainer_state model.safetensors; do
  out="$TMP/runs/ckpt_fail_$((++n))"    # a folder name that does not contain the failing text
  TRAINER_FAIL_WRITE=$f run_trainer "$TMP/plain.lua" steps=4 out="$out" --quiet
  expect_rc ${f}_fail_rc 1
  expect_err ${f}_fail_names_file "$out/checkpoint-3.tmp/$f"   # trainer_state: its .safetensors stage fails first
  expect_err ${f}_fail_says_cannot_write "cannot write (No space left on device"
  if ls "$out" | grep -q '^checkpoint'; then fail ${f}_fail_no_checkpoint "$(ls "$out")"; else pass ${f}_fail_no_checkpoint; fi
  if grep -q "internal error" "$TMP/err"; then fail ${f}_fail_not_internal "$ERR"; else pass ${f}_fail_not_internal; fi
done

# ---- 1b. a file-size limit (ulimit -f; needs no root) reached by metrics.jsonl near step 97 of
# a 200-step run: exit 1 naming metrics.jsonl, whole lines only. By then LuaJIT has compiled
# the writer; before sys.append_file its compiled f:flush() turned the failed flush into a
# success (the interpreter reran it on an emptied buffer), lines were lost silently and the
# file was left ending mid-line (3 runs in 4 here, 1 in 3 on the tmpfs below).
cat >"$TMP/long.lua" <<EOF
return { extends = "$TMP/plain.lua", out = "$TMP/runs/fsize", steps = 200, save = { every = 1000, final = false },
  eval = { every = 1000, at_start = false }, log = { tensorboard = false } }
EOF
( trap '' XFSZ; ulimit -f 40; "$TRAINER" "$TMP/long.lua" --quiet >"$TMP/out" 2>"$TMP/err" </dev/null )
RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
expect_rc fsize_limit_exit_1 1
expect_err fsize_limit_names_metrics "$TMP/runs/fsize/metrics.jsonl: cannot write (File too large)"
run_trainer run "$TMP/whole.lua" "$TMP/runs/fsize/metrics.jsonl"
expect_rc fsize_limit_metrics_whole_lines 0

# ---- 2. a real full disk
MNT="$TMP/small_disk"
mkdir -p "$MNT"
if ! mount -t tmpfs -o size=2m tmpfs "$MNT" 2>/dev/null; then
  echo "SKIP full_disk: mount -t tmpfs is not permitted here (needs root); the injected failures above still ran"
  finish
  exit $?
fi
trap 'umount "$MNT" 2>/dev/null; rm -rf "$TMP"' EXIT

# filled up at step 2 by the recipe itself: the next write that needs a page fails (event
# files off here and in 1b: they grow faster than metrics.jsonl and would fail first;
# tests/cli/test_tensorboard.sh fills a disk under them)
cat >"$TMP/fill.lua" <<EOF
return {
  extends = "$TMP/plain.lua", out = "$MNT/run", steps = 40, save = { every = 1000 }, log = { tensorboard = false },
  hooks = { on_step = function(t)
    if t.step == 2 then os.execute("dd if=/dev/zero of=$MNT/filler bs=4096 2>/dev/null") end
  end },
}
EOF
run_trainer "$TMP/fill.lua" --quiet
expect_rc full_disk_exit_1 1
expect_err full_disk_names_metrics "$MNT/run/metrics.jsonl: cannot write (No space left on device)"
expect_err full_disk_free_space "0 B free on the file system of $MNT/run"
run_trainer run "$TMP/whole.lua" "$MNT/run/metrics.jsonl"
expect_rc full_disk_metrics_whole_lines 0
if [ -e "$MNT/run/summary.json" ]; then fail full_disk_no_summary "summary.json exists"; else pass full_disk_no_summary; fi
no_tmp_left full_disk_no_tmp "$MNT/run"

# too small for the first checkpoint: the checkpoint folder never gets its final name
rm -rf "$MNT"/* && umount "$MNT" && mount -t tmpfs -o size=48k tmpfs "$MNT"
run_trainer "$TMP/plain.lua" steps=4 out="$MNT/run" --quiet
expect_rc small_disk_exit_1 1
expect_err small_disk_names_checkpoint_file "$MNT/run/checkpoint-3.tmp/"
expect_err small_disk_free_space "free on the file system of $MNT/run"
if ls "$MNT/run" | grep -q '^checkpoint'; then fail small_disk_no_checkpoint "$(ls "$MNT/run")"; else pass small_disk_no_checkpoint; fi
no_tmp_left small_disk_no_tmp "$MNT/run"
umount "$MNT"
finish
