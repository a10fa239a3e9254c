#!/usr/bin/env bash
# Fails when a hot f32 loop of the CPU kernels stops vectorising (a float ?:, a call that is
# not inlined into a clone, a byte beside the floats: each once kept a hot loop scalar or
# narrow, unseen by any test). Reads GCC's vectoriser reports, build/vec/FILE.vect, which
# `make test` writes by compiling kernels/cpu/FILE.c with the release flags and
# -fdump-tree-vect-details, and checks every function of tests/vec/loops.txt in every clone:
# at least that many distinct loops vectorised, each at the clone's full width.
#   tests/vec/check_vectorised.sh [DUMP_DIR]   (default build/vec)
# Prints PASS/FAIL lines for tests/run.sh.
set -u
cd "$(dirname "$0")/../.."
dir=${1:-build/vec}
list=tests/vec/loops.txt
status=0
if ! ${CC:-cc} -v 2>&1 | grep -q '^gcc version'; then
  echo "SKIP vectorised: the reports are GCC's (-fdump-tree-vect-details) and CC=${CC:-cc} is not GCC"
  exit 0
fi
while read -r file fn want; do
  case "$file" in ''|'#'*) continue ;; esac
  dump="$dir/${file%.c}.vect"
  name="vectorised.$fn"
  if [ ! -s "$dump" ]; then
    echo "FAIL $name: no vectoriser report $dump; run \`make test\` (it compiles kernels/cpu/$file with -fdump-tree-vect-details)"
    status=1; continue
  fi
  # the clones GCC made of this function, with the width each must reach (a build without
  # TR_SIMD_CLONES, not x86-64 GCC, has the baseline function only)
  bad=""
  clones="$fn:16"
  grep -q "^;; Function $fn\\.avx512f " "$dump" && clones="$fn.avx512f:64 $fn.arch_x86_64_v3:32 $fn:16"
  for clone in $clones; do
    cfn=${clone%:*} width=${clone##*:}
    if ! grep -q "^;; Function $cfn " "$dump"; then
      bad="$bad; $cfn is not in $dump (renamed? update $list)"; continue
    fi
    # per loop (file:line), the widest "loop vectorized using N byte vectors" in this function
    got=$(awk -v f="$cfn" -v w="$width" '
      /^;; Function / { inside = ($3 == f) }
      inside && /optimized: loop vectorized using/ {
        split($1, a, ":"); loop = a[1] ":" a[2]
        n = $(NF - 2) + 0; if (n > best[loop]) best[loop] = n }
      END { full = 0; for (l in best) if (best[l] >= w) full++; print full }' "$dump")
    if [ "$got" -lt "$want" ]; then
      bad="$bad; $cfn: $got of its loops vectorised at $width-byte width, want $want"
    fi
  done
  if [ -n "$bad" ]; then
    echo "FAIL $name: kernels/cpu/$file${bad} (see the missed: lines of $dump)"
    status=1
  else
    echo "PASS $name"
  fi
done < "$list"
exit $status
