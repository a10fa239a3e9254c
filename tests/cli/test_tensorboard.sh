#!/usr/bin/env bash
# TensorBoard event files (out/tb/), read back with TensorBoard's own reader, the PyPI
# tensorboard package in build/tb-venv (.ci/run prepares it; without it, or without
# Python, the reader checks print a SKIP line and the rest still runs):
#   1. a run stopped by SIGINT after step 4 and continued by `trainer resume`: every scalar
#      of metrics.jsonl at every step with its value, one unbroken curve over two files,
#      the second opening with SessionLog START at step 5, the recipe as text at step 0;
#   2. a finished run resumed from its checkpoint-3 into its own folder: the points after
#      step 3 are replaced, not doubled (TensorBoard's purge on SessionLog START);
#   3. a flipped byte (data, then length) is a DataLossError of TensorBoard's reader;
#   4. log.tensorboard = false writes no event file;
#   5. write failures: at the start, mid-run (cut back to whole records), a real full disk
#      (a tiny tmpfs at out/tb, where mount is permitted): exit 1 naming the file;
#   6. under mpirun -np 2 (where the build has MPI) only rank 0 writes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_fixtures.sh"
cd "$ROOT"

PY="$ROOT/build/tb-venv/bin/python"
CHECK="$ROOT/tests/cli/check_tensorboard.py"
if [ -x "$PY" ] && "$PY" -c "import tensorboard.backend.event_processing.event_accumulator" 2>/dev/null; then
  have_tb=1
else
  have_tb=0
  echo "SKIP tensorboard_reader: TensorBoard's reader is not installed in build/tb-venv (.ci/run prepares it: python3 -m venv build/tb-venv && build/tb-venv/bin/pip install tensorboard); the checks that need no reader still run"
fi
reader() { # check_tensorboard.py ARGS...: it prints the PASS/FAIL lines (a crash prints one too)
  [ "$have_tb" = 1 ] || return 0
  "$PY" "$CHECK" "$@" || failures=$((failures + 1))
}
nfiles() { ls "$1/tb" 2>/dev/null | grep -c '^events\.out\.tfevents\.'; }
first_file() { ls "$1"/tb/events.out.tfevents.* 2>/dev/null | sort | head -1; }

# ---- 1. SIGINT after step 4, then trainer resume: one curve over two files
run="$TMP/runs/tb"
STOP_AT=4 run_trainer "$TMP/sts.lua" steps=8 eval.every=3 out="$run" --quiet
expect_rc sigint_rc 130
[ "$(nfiles "$run")" = 1 ] && pass sigint_one_file || fail sigint_one_file "$(ls "$run/tb")"
run_trainer resume "$run" --quiet
expect_rc resume_rc 0
[ "$(nfiles "$run")" = 2 ] && pass resume_adds_a_file || fail resume_adds_a_file "$(ls "$run/tb")"
reader values "$run" resumed 2
reader structure "$run" resumed_structure 5

# ---- 2. a finished run resumed from its checkpoint-3 into its own folder: steps 4..8 again
run2="$TMP/runs/again"
run_trainer "$TMP/plain.lua" steps=8 out="$run2" --quiet
expect_rc full_run_rc 0
run_trainer "$TMP/plain.lua" steps=8 out="$run2" resume="$run2/checkpoint-3" --quiet
expect_rc earlier_checkpoint_rc 0
reader values "$run2" earlier_checkpoint 2
reader structure "$run2" earlier_checkpoint_structure 4

# ---- 3. damaged files: the CRCs are real
reader corrupt "$(first_file "$run")" damaged

# ---- 4. off
run_trainer "$TMP/plain.lua" steps=2 out="$TMP/runs/off" log.tensorboard=false --quiet
expect_rc off_rc 0
[ "$(nfiles "$TMP/runs/off")" = 0 ] && pass off_no_event_file || fail off_no_event_file "$(ls "$TMP/runs/off/tb")"
# a fresh run into a finished run's folder (overwrite = true) replaces its event files, as it
# replaces metrics.jsonl
run_trainer "$TMP/plain.lua" steps=2 out="$run2" save.every=1000 overwrite=true --quiet
expect_rc fresh_run_rc 0
[ "$(nfiles "$run2")" = 1 ] && pass fresh_run_replaces_files || fail fresh_run_replaces_files "$(ls "$run2/tb")"

# ---- 5. write failures
TRAINER_FAIL_WRITE=tfevents run_trainer "$TMP/plain.lua" steps=2 out="$TMP/runs/w_start" --quiet
expect_rc start_fail_rc 1
expect_err start_fail_names_file "$TMP/runs/w_start/tb/events.out.tfevents."
expect_err start_fail_says_why "cannot write (No space left on device"
expect_err start_fail_free_space "free on the file system of $TMP/runs/w_start/tb"
expect_err start_fail_says_fix "log.tensorboard = false"
if find "$TMP/runs/w_start" -name '*.tmp' | grep -q .; then fail start_fail_no_tmp "$(find "$TMP/runs/w_start" -name '*.tmp')"; else pass start_fail_no_tmp; fi

# mid-run: the recipe's hook turns the injection on after step 3 (setenv), so the append
# of step 3's row is the first to fail
cat >"$TMP/fail_mid.lua" <<EOF
return { extends = "$TMP/plain.lua", steps = 8, out = "$TMP/runs/w_mid", save = { every = 1000 },
  hooks = { on_step = function(t)
    if t.step == 3 then
      local ffi = require("ffi")
      pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite);")
      ffi.C.setenv("TRAINER_FAIL_WRITE", "tfevents", 1)
    end
  end } }
EOF
run_trainer "$TMP/fail_mid.lua" --quiet
expect_rc mid_fail_rc 1
expect_err mid_fail_names_file "$TMP/runs/w_mid/tb/events.out.tfevents."
expect_err mid_fail_cut_back "cut back to its last whole record"
if grep -q "internal error" "$TMP/err"; then fail mid_fail_not_internal "$ERR"; else pass mid_fail_not_internal; fi
reader whole "$(first_file "$TMP/runs/w_mid")" mid_fail_file 2

# a real full disk, where mount is permitted: a tmpfs at out/tb, filled at step 2
MNT="$TMP/runs/disk/tb"
mkdir -p "$MNT"
if mount -t tmpfs -o size=64k tmpfs "$MNT" 2>/dev/null; then
  trap 'umount "$MNT" 2>/dev/null; rm -rf "$TMP"' EXIT
  cat >"$TMP/fill.lua" <<EOF
return { extends = "$TMP/plain.lua", steps = 40, out = "$TMP/runs/disk", save = { every = 1000 },
  hooks = { on_step = function(t)
    if t.step == 2 then os.execute("dd if=/dev/zero of=$MNT/filler bs=4096 2>/dev/null") end
  end } }
EOF
  run_trainer "$TMP/fill.lua" --quiet
  expect_rc full_disk_rc 1
  expect_err full_disk_names_file "$MNT/events.out.tfevents."
  expect_err full_disk_says_why "cannot write (No space left on device)"
  expect_err full_disk_free_space "0 B free on the file system of $MNT"
  reader whole "$(first_file "$TMP/runs/disk")" full_disk_file
  umount "$MNT"
else
  echo "SKIP tensorboard_full_disk: mount -t tmpfs is not permitted here (needs root); the injected failures above still ran"
fi

# ---- 6. mpirun: rank 0 writes
echo 'io.write(require("trainer.core.ffi").tr_dist_have_mpi() == 1 and "yes" or "no")' >"$TMP/have_mpi.lua"
if command -v mpirun >/dev/null && [ "$("$TRAINER" run "$TMP/have_mpi.lua" 2>/dev/null)" = yes ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
  timeout 60 mpirun --oversubscribe -np 2 "$TRAINER" "$TMP/plain.lua" steps=2 out="$TMP/runs/mpi" --quiet \
    >"$TMP/out" 2>"$TMP/err" </dev/null
  RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
  expect_rc mpirun_rc 0
  [ "$(nfiles "$TMP/runs/mpi")" = 1 ] && pass mpirun_rank0_only || fail mpirun_rank0_only "$(ls "$TMP/runs/mpi/tb")"
  reader values "$TMP/runs/mpi" mpirun 1
else
  echo "SKIP tensorboard_mpirun: this build has no MPI (or mpirun is missing)"
fi
finish
