#!/usr/bin/env bash
# Installs, with apt, every Debian package the build and the tests need that is not there yet.
# Idempotent: when everything is present it prints one line and changes nothing.
# `make deps` and `.ci/run` call it; a person can run it too (needs root or sudo).
#   bash scripts/deps.sh            installs what is missing
#   bash scripts/deps.sh --check    prints the missing packages the build itself needs (none:
#                                   an empty line), installs nothing; exit 1 when some are missing
#                                   (`make` calls it to say what to install)
set -euo pipefail

# pkg-config name -> Debian package
declare -A PKG=(
  [luajit]=libluajit-5.1-dev
  [libedit]=libedit-dev
  [zlib]=zlib1g-dev
  [openblas]=libopenblas-dev
  [jansson]=libjansson-dev
  [libutf8proc]=libutf8proc-dev
)
missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v make >/dev/null 2>&1 || missing+=(make)
for pc in "${!PKG[@]}"; do
  if ! pkg-config --exists "$pc" 2>/dev/null; then missing+=("${PKG[$pc]}"); fi
done
if [ "${1:-}" = "--check" ]; then
  [ ${#missing[@]} -eq 0 ] && { echo; exit 0; }
  printf '%s\n' "${missing[@]}" | sort | paste -sd ' '
  exit 1
fi
# tmux: tests/cli/test_repl_terminal.sh types into the REPL in a real terminal (a SKIP without it)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
# make lint: cppcheck on the C, luacheck on the Lua; make format: clang-format
command -v cppcheck >/dev/null 2>&1 || missing+=(cppcheck)
command -v luacheck >/dev/null 2>&1 || missing+=(lua-check)
command -v clang-format >/dev/null 2>&1 || missing+=(clang-format)
# clang with libFuzzer: the fuzz targets of tests/fuzz (make fuzz; make test runs them briefly)
command -v clang >/dev/null 2>&1 || missing+=(clang)
if ! printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' \
    | clang -x c -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  v=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
  missing+=("libclang-rt-${v:-14}-dev")
fi
# Open MPI: `mpirun -np N trainer RECIPE.lua` (core/dist/) and tests/cli/test_distributed.sh;
# optional for the build (the Makefile builds without it), installed here so that CI runs them
command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
pkg-config --exists ompi-c 2>/dev/null || missing+=(libopenmpi-dev)
# oneDNN: the CPU matrix products (core/cpu_device/gemm_onednn.c; headers at build time, libdnnl2
# loaded at run time); optional, the build runs on OpenBLAS without it
[ -f /usr/include/dnnl.h ] || missing+=(libdnnl-dev)
# The OpenMP build of OpenBLAS shares the kernels' thread pool (the Makefile prefers it).
arch=$(cc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
[ -d "/usr/lib/$arch/openblas-openmp" ] || missing+=(libopenblas-openmp-dev)
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all build dependencies present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "deps: missing ${missing[*]}; run as root: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
