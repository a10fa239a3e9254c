# cuda_targets.sh — sourced after lib.sh by the CLI tests that check which GPU targets a CUDA
# binary carries (test_cuda_targets.sh, test_gpu_bundle.sh, test_cuda12_bundle.sh).
#   find_cuobjdump NAME       sets CUOBJDUMP (scripts/install_cuobjdump.sh: PyPI's wheel, once);
#                             or prints "SKIP NAME: why" and returns 1 (offline)
#   expect_targets NAME FILE "sm_75 sm_80 ..." PTX
#                             one PASS/FAIL line each for NAME_sass: cuobjdump --list-elf shows
#                             machine code for exactly these targets, as many images for each
#                             (every .cu file built for every target), and NAME_ptx:
#                             --list-ptx shows the PTX of exactly PTX (compute_N)
#   makefile_default_targets VAR   the Makefile's default of VAR (CUDA_ARCHS, CUDA12_ARCHS) as
#                             "sm_75 sm_80 ..."
find_cuobjdump() {
  if CUOBJDUMP=$(bash "$ROOT/scripts/install_cuobjdump.sh" 2>"$TMP/cuobjdump.err"); then return 0; fi
  echo "SKIP $1: no cuobjdump: $(tail -1 "$TMP/cuobjdump.err")"
  return 1
}

makefile_default_targets() {
  sed -n "s/^$1 ?= *//p" "$ROOT/Makefile" | tr ' ' '\n' | sed -n 's/^\([0-9][0-9]*\)$/sm_\1/p' | tr '\n' ' ' | sed 's/ $//'
}

expect_targets() {
  local name=$1 file=$2 want=$3 ptx=$4 counts listed want_sorted ptx_listed
  if ! "$CUOBJDUMP" --list-elf "$file" >"$TMP/elf" 2>&1; then
    fail "${name}_sass" "cuobjdump --list-elf $file: $(tail -1 "$TMP/elf")"
  else
    counts=$(grep -o 'sm_[0-9]*\.cubin' "$TMP/elf" | sed 's/\.cubin$//' | sort -V | uniq -c)
    listed=$(echo "$counts" | awk 'NF { print $2 }' | tr '\n' ' ' | sed 's/ $//')
    want_sorted=$(echo "$want" | tr ' ' '\n' | sort -V | tr '\n' ' ' | sed 's/ $//')
    if [ "$listed" != "$want_sorted" ]; then
      fail "${name}_sass" "machine code for '$listed', want '$want_sorted'"
    elif [ "$(echo "$counts" | awk 'NF { print $1 }' | sort -u | wc -l)" != 1 ]; then
      fail "${name}_sass" "a target has fewer images than another (a .cu file built without it): $(echo "$counts" | tr -s ' \n' ' ')"
    else
      pass "${name}_sass"
    fi
  fi
  if ! "$CUOBJDUMP" --list-ptx "$file" >"$TMP/ptx" 2>&1; then
    fail "${name}_ptx" "cuobjdump --list-ptx $file: $(tail -1 "$TMP/ptx")"; return
  fi
  ptx_listed=$(grep -o 'sm_[0-9]*\.ptx' "$TMP/ptx" | sed 's/^sm_\(.*\)\.ptx$/compute_\1/' | sort -u | tr '\n' ' ' | sed 's/ $//')
  if [ "$ptx_listed" = "$ptx" ]; then pass "${name}_ptx"; else fail "${name}_ptx" "PTX for '$ptx_listed', want '$ptx'"; fi
}
