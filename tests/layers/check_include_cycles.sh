#!/usr/bin/env bash
# Fails when core/ has a circle (docs/ARCHITECTURE.md, "Layers": each layer depends only on
# the layers below it), at two grains, printing the circle with what makes each edge:
#   folders  the #include lines of core/*/: a quoted include is resolved as the compiler
#            resolves it under the Makefile's flags (the including file's own folder, then
#            -Icore, then each core/*/ folder, then -Ikernels, outside core/ so no edge); a
#            folder that includes a header of another depends on it;
#   files    what those includes give a file, resolved to the file behind each declaration:
#            a .c or .cu file of core/ depends on another when it names (outside comments
#            and strings) a function that the other defines (at the start of a line, not
#            static). A backend's context file and its helpers, an allocator and its report:
#            each pair one direction.
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
# find_circle: reads "from to via" lines, prints the first circle found, one edge a line
find_circle() {
  awk '
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
  END { for (n in node) if (state[n] == 0 && dfs(n)) exit 0 }'
}
cycle=$(printf '%s\n' "$edges" | find_circle)
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

# ---------------------------------------------------------------- files
name=include_layers.no_file_circle
files=$(ls core/*/*.c core/*/*.cu 2>/dev/null)
# "from-file to-file function" for every function a file names that another file defines
file_edges=$(awk '
  FNR == 1 { incomment = 0 }
  {
    raw = $0
    # a definition: a line that starts with its type and names a tr_ function, not static
    if (raw ~ /^[A-Za-z_][A-Za-z0-9_ *()]*[ *]tr_[A-Za-z0-9_]+\(/ && raw !~ /;[ \t]*$/ && raw !~ /^#/) {
      match(raw, /tr_[A-Za-z0-9_]+\(/)
      pre = substr(raw, 1, RSTART - 1)
      if (pre !~ /(static|typedef|extern|return)/) {
        fn = substr(raw, RSTART, RLENGTH - 1)
        if (!((fn SUBSEP FILENAME) in isdef)) { isdef[fn, FILENAME]; defs[fn] = defs[fn] " " FILENAME }
      }
    }
    # the line without comments and string or character literals
    out = ""; i = 1; n = length(raw)
    while (i <= n) {
      c = substr(raw, i, 1); c2 = substr(raw, i, 2)
      if (incomment) { if (c2 == "*/") { incomment = 0; i += 2 } else i++; continue }
      if (c2 == "/*") { incomment = 1; i += 2; continue }
      if (c2 == "//") break
      if (c == "\"" || c == "\047") {
        q = c; i++
        while (i <= n && substr(raw, i, 1) != q) { if (substr(raw, i, 1) == "\\") i++; i++ }
        i++; out = out " "; continue
      }
      out = out c; i++
    }
    while (match(out, /tr_[A-Za-z0-9_]+/)) {
      w = substr(out, RSTART, RLENGTH)
      if (!((FILENAME SUBSEP w) in used)) { used[FILENAME, w]; uses[FILENAME] = uses[FILENAME] " " w }
      out = substr(out, RSTART + RLENGTH)
    }
  }
  END {
    for (f in uses) {
      k = split(uses[f], ws, " ")
      for (a = 1; a <= k; a++) {
        m = split(defs[ws[a]], ds, " ")
        for (b = 1; b <= m; b++)
          if (ds[b] != f && !((f SUBSEP ds[b]) in seen)) { seen[f, ds[b]]; print f, ds[b], ws[a] }
      }
    }
  }' $files | sort)
if [ -z "$file_edges" ]; then
  echo "FAIL $name: no file of core/ names a function of another (is this the repository root?)"
  exit 1
fi
cycle=$(printf '%s\n' "$file_edges" | find_circle)
if [ -n "$cycle" ]; then
  echo "FAIL $name: the files of core/ make a circle (each line: a file, the file it calls, the function):"
  printf '%s\n' "$cycle" | sed 's/^/  /'
  exit 1
fi
echo "PASS $name"
