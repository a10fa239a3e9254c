#!/usr/bin/env bash
# scripts/gpu_bundle.sh STAGE BUILT — lays out the GPU bundle (`make gpu-bundle` calls it
# after linking build/bundle/*), copies in the shared libraries a bare CUDA 13 machine
# lacks, checks that every program in it resolves its libraries from the bundle (all but
# the C library, libm, libstdc++ and the CUDA libraries), and packs STAGE.tar.gz, which
# must be at most 60 MiB.
#
# Layout (relocatable; every program finds lib/ through its rpath, trainer its Lua tree
# beside it):
#   trainer  lua/  recipes/  core/ (headers)  lib/  bin/ (GPU tests, CUDA benchmarks)
#   tests/gpu/ (run.sh, NOTES.md, *.lua, train_parity.sh)  bench/gpu/ (trainer against transformers + peft)
#   tests/cudacpu/ (train_*.sh and their *.lua: the whole-run comparisons)
#   tests/lua/testlib.lua (the helpers those Lua files load)
# On the GPU machine: tar xzf trainer-gpu.tar.gz && OUT=... bash trainer-gpu/tests/gpu/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
stage=${1:?usage: gpu_bundle.sh STAGE BUILT}
built=${2:?usage: gpu_bundle.sh STAGE BUILT}
max_mib=60

rm -rf "$stage" "$stage.tar.gz"
mkdir -p "$stage/lib" "$stage/bin" "$stage/tests/gpu"
cp "$built/trainer" "$stage/trainer"
cp -R lua recipes "$stage/"
# The FFI reads the runtime's headers at start (lua/trainer/core/ffi.lua): core/ and its folders.
stage_abs=$(cd "$stage" && pwd)
(cd core && for h in *.h */*.h; do mkdir -p "$stage_abs/core/$(dirname "$h")" && cp "$h" "$stage_abs/core/$h"; done)
cp tests/gpu/run.sh tests/gpu/NOTES.md tests/gpu/*.lua tests/gpu/train_parity.sh "$stage/tests/gpu/"
# the whole-run comparisons tests/gpu/run.sh runs after train_parity.sh (they also run on the emulator)
mkdir -p "$stage/tests/cudacpu"
cp tests/cudacpu/train_*.sh tests/cudacpu/*.lua "$stage/tests/cudacpu/"
mkdir -p "$stage/tests/lua"
cp tests/lua/testlib.lua "$stage/tests/lua/"
mkdir -p "$stage/bench/gpu"
cp bench/gpu/run.sh bench/gpu/trainer_side.lua bench/gpu/torch_side.py "$stage/bench/gpu/"
for f in "$built"/tests/* "$built"/bench/*; do [ -f "$f" ] && cp "$f" "$stage/bin/"; done
# Debug sections are for this machine; the bundle travels.
strip --strip-debug "$stage/trainer" "$stage"/bin/* 2>/dev/null || true

# A library stays outside the bundle when every CUDA machine has it: the C library and its
# parts, the dynamic loader, libm, libstdc++, libgcc's, and the CUDA libraries themselves
# (cuBLASLt is not even linked: the runtime dlopens libcublasLt.so.13 on the first GPU
# matrix product, found through the rpath to the CUDA toolkit's lib64).
system_lib() {
  case $1 in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas.so*|libcublasLt.so*|libnccl.so*|libnvrtc.so*) return 0 ;;
  esac
  return 1
}

programs=("$stage/trainer" "$stage"/bin/*)
for prog in "${programs[@]}"; do
  [ -f "$prog" ] || continue
  while read -r name _ path _; do
    system_lib "$name" && continue
    [ -n "$path" ] && [ -f "$path" ] || { echo "gpu-bundle: $prog needs $name, which this machine cannot resolve" >&2; exit 1; }
    [ -e "$stage/lib/$name" ] || cp -L "$path" "$stage/lib/$name"
  done < <(ldd "$prog" | awk '$2 == "=>" { print $1, $2, $3, $4 }')
done

# The check: with nothing but the bundle and the system, every program resolves each of
# its libraries either inside lib/ or to an allowed system library.
bad=0
for prog in "${programs[@]}"; do
  [ -f "$prog" ] || continue
  while read -r name _ path _; do
    if [ "$path" = "not" ]; then
      system_lib "$name" || { echo "gpu-bundle: $(basename "$prog"): $name not found" >&2; bad=1; }
      continue
    fi
    case $(readlink -f "$path") in "$(cd "$stage/lib" && pwd -P)"/*) continue ;; esac
    system_lib "$name" || { echo "gpu-bundle: $(basename "$prog"): $name resolves outside the bundle ($path)" >&2; bad=1; }
  done < <(ldd "$prog" | awk '$2 == "=>" { print $1, $2, $3, $4 }')
done
[ "$bad" = 0 ] || exit 1

tar -C "$(dirname "$stage")" -czf "$stage.tar.gz" "$(basename "$stage")"
bytes=$(stat -c %s "$stage.tar.gz")
mib=$(( (bytes + 1048575) / 1048576 ))
echo "gpu-bundle: $stage.tar.gz, $mib MiB ($(ls "$stage/lib" | wc -l) libraries: $(ls "$stage/lib" | tr '\n' ' '))"
if [ "$mib" -gt "$max_mib" ]; then echo "gpu-bundle: larger than $max_mib MiB" >&2; exit 1; fi
