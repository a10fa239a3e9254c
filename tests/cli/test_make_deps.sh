#!/usr/bin/env bash
# `make` installs nothing: with a build dependency missing it names the Debian packages and
# the one command that installs them (make deps) and stops with a non-zero status; `make
# clean` still works. A missing dependency is simulated by a pkg-config that finds nothing.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
PKG_CONFIG_LIBDIR=/nonexistent make -n >"$TMP/out" 2>"$TMP/err" </dev/null
RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
if [ "$RC" -ne 0 ]; then pass make_stops_when_a_dependency_is_missing
else fail make_stops_when_a_dependency_is_missing "make -n exited 0"; show; fi
expect_err make_names_the_missing_packages "libjansson-dev"
expect_err make_names_the_install_command "Install them with: make deps"
if grep -q "apt-get" "$TMP/out"; then fail make_installs_nothing "make -n would run apt-get"; show
else pass make_installs_nothing; fi
bash scripts/deps.sh --check >"$TMP/out" 2>"$TMP/err"
RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
if [ "$RC" = 0 ] && [ -z "$OUT" ]; then pass deps_check_is_empty_when_all_present
else fail deps_check_is_empty_when_all_present "deps.sh --check: exit $RC, '$OUT'"; fi
PKG_CONFIG_LIBDIR=/nonexistent make -n clean >"$TMP/out" 2>"$TMP/err" </dev/null
RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err")
expect_rc make_clean_needs_no_dependency 0
finish
