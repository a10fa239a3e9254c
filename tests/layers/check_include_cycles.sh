#!/usr/bin/env bash
# Fails when the #include lines of core/*/ make a circle among core/ folders (docs/
# ARCHITECTURE.md, "Layers": each layer depends only on the layers below it). A quoted include
# is resolved as the compiler resolves it under the Makefile's flags: the including file's own
# folder, then -Icore, then each core/*/ folder, then -Ikernels (outside core/, so no edge).
# Every folder that includes a header of another folder depends on that folder; a circle in that
# graph is printed with the include line behind each of its edges.
#   tests/layers/check_include_cycles.sh [ROOT]   (default: the repository)
# Prints PASS/FAIL lines for tests/run.sh.
set -u
cd "${1:-$(dirname "$0")/../..}"
name=include_layers.no_circle
# "from-folder to-folder file:line" for every include that crosses core/ folders
edges=$(
  for f in core/*/*.c core/*/*.h core/*/*.cu; do
    [ -e "$f" ] || continue
    dir=${f%/*}
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
      num=${line%%:*}
      hdr=${line#*\"}; hdr=${hdr%%\"*}
      to=""
      if [ -e "$dir/$hdr" ]; then to=$dir
      elif [ -e "core/$hdr" ]; then to=core
      else
        for d in core/*/; do
          if [ -e "$d$hdr" ]; then to=${d%/}; break; fi
        done
      fi
      [ -n "$to" ] && [ "$to" != "$dir" ] && [ "$to" != core ] && echo "$dir $to $f:$num"
    done
  done
)
cycle=$(printf '%s\n' "$edges" | awk '
  NF == 3 { if (!((($1 SUBSEP $2)) in via)) { via[$1, $2] = $3; out[$1] = out[$1] " " $2 }; node[$1]; node[$2] }
  function dfs(n,    i, k, m, nb) {
    state[n] = 1; stack[++depth] = n
    k = split(out[n], nb, " ")
    for (i = 1; i <= k; i++) {
      m = nb[i]
      if (state[m] == 1) {          # back edge: the circle is stack[from m] .. n -> m
        s = ""
        for (j = 1; j <= depth; j++) if (stack[j] == m) break
        for (; j <= depth; j++) { nx = (j < depth) ? stack[j + 1] : m; s = s stack[j] " -> " nx " (" via[stack[j], nx] ")\n" }
        printf "%s", s; found = 1; return 1
      }
      if (state[m] == 0 && dfs(m)) return 1
    }
    state[n] = 2; depth--
    return 0
  }
  END { for (n in node) if (state[n] == 0 && dfs(n)) exit 0 }')
if [ -z "$edges" ]; then
  echo "FAIL $name: no include crosses core/ folders (is this the repository root?)"
  exit 1
fi
if [ -n "$cycle" ]; then
  echo "FAIL $name: the includes of core/ make a circle among its folders:"
  printf '%s\n' "$cycle" | sed 's/^/  /'
  exit 1
fi
echo "PASS $name"
