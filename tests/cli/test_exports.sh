#!/usr/bin/env bash
# The binary exports (for the LuaJIT FFI, linked with --export-dynamic) only the runtime's
# tr_* functions, main, and the symbols the linker defines in every executable: no C++
# mangled name, no helper that should have been static. Checked on ./trainer (with the CUDA
# backend when nvcc built it); the CUDA-on-CPU binary (build/cudacpu/trainer) is not checked:
# it links the emulator, which defines the CUDA runtime's own functions (cudaMalloc, ...).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
if ! command -v nm >/dev/null 2>&1; then
  echo "SKIP exports: nm is not installed (binutils)"; exit 0
fi
# Defined by the linker or the C runtime's start files in every executable.
LINKER_SYMBOLS=" _start main _init _fini _edata _end __bss_start __data_start data_start _IO_stdin_used "
check_exports() { # name binary
  local name=$1 bin=$2 syms other=""
  if ! syms=$(nm -D --defined-only "$bin" 2>"$TMP/nm_err" | awk '{ print $NF }'); then
    fail "$name" "nm -D $bin failed: $(head -c 300 "$TMP/nm_err")"; return
  fi
  if ! printf '%s\n' "$syms" | grep -q '^tr_'; then fail "$name" "$bin exports no tr_ function"; return; fi
  for s in $syms; do
    case "$s" in tr_*) continue ;; esac
    case "$LINKER_SYMBOLS" in *" $s "*) continue ;; esac
    other="$other $s"
  done
  if [ -z "$other" ]; then pass "$name"; else fail "$name" "$bin exports symbols that are not tr_*:$other"; fi
}
check_exports binary_exports_only_tr_functions_and_main "$TRAINER"
finish
