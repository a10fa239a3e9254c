#!/usr/bin/env bash
# The binary runs libgomp with a short spin at barriers (GOMP_SPINCOUNT=10000, set before
# libgomp loads by re-executing itself once; core/main.c says why), and keeps a user's own
# OMP_WAIT_POLICY or GOMP_SPINCOUNT untouched; the command line survives the re-exec; under
# valgrind it does not re-execute.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
cat >"$TMP/env.lua" <<'LUA'
print("spincount=" .. tostring(os.getenv("GOMP_SPINCOUNT")) .. " policy=" .. tostring(os.getenv("OMP_WAIT_POLICY"))
      .. " args=" .. table.concat(arg or {}, ","))
LUA
( unset OMP_WAIT_POLICY GOMP_SPINCOUNT; run_trainer run "$TMP/env.lua" a "b c"
  expect_rc default_rc 0
  expect_out default_short_spin "spincount=10000 policy=nil args=a,b c"
  finish ) || failures=$((failures + 1))
( unset GOMP_SPINCOUNT; export OMP_WAIT_POLICY=active; run_trainer run "$TMP/env.lua"
  expect_out user_policy_kept "spincount=nil policy=active"
  finish ) || failures=$((failures + 1))
( unset OMP_WAIT_POLICY; export GOMP_SPINCOUNT=7; run_trainer run "$TMP/env.lua"
  expect_out user_spincount_kept "spincount=7 policy=nil"
  finish ) || failures=$((failures + 1))
# under valgrind (its vgpreload library in LD_PRELOAD) the binary stays in the tool: no re-exec
( unset OMP_WAIT_POLICY GOMP_SPINCOUNT
  LD_PRELOAD=/nonexistent/vgpreload_test.so "$TRAINER" run "$TMP/env.lua" >"$TMP/out" 2>"$TMP/err" </dev/null
  RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
  expect_out valgrind_no_reexec "spincount=nil policy=nil"
  finish ) || failures=$((failures + 1))
finish
