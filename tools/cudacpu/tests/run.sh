#!/usr/bin/env bash
# tools/cudacpu/tests/run.sh OUT — the emulator's own tests: each deliberately broken kernel
# must be flagged, each correct one must pass. Prints PASS/FAIL lines.
set -u
echo "SKIP cudacpu_self_tests: not written yet"
