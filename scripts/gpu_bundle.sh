#!/usr/bin/env bash
# scripts/gpu_bundle.sh STAGE BUILT — lays out the GPU bundle (`make gpu-bundle` calls it
# after linking BUILT: build/bundle, or build/cuda12-obj/bundle for the CUDA 12 one), copies
# in the shared libraries a bare CUDA machine lacks, checks that every program in it
# resolves its libraries from the bundle (all but the C library, libm, libstdc++ and the
# driver's and cuBLAS's libraries), writes BUNDLE.txt (the CUDA version, the driver it needs,
# the targets, the cuBLASLt it loads) and packs STAGE.tar.gz, which must be at most 60 MiB.
# Environment: CUDA_HOME (the toolkit it was built with), CUDA_TARGETS ("sm_75 ... compute_120").
#
# Layout (relocatable; every program finds lib/ through its rpath, trainer its Lua tree
# beside it):
#   trainer  BUNDLE.txt  lua/  recipes/  core/ (headers)  bin/ (GPU tests, CUDA benchmarks)
#   lib/ (libtrainer.so: the runtime and every kernel, shared by all the programs; libcudart)
#   tests/gpu/ (run.sh, NOTES.md, *.lua, train_parity.sh)  bench/gpu/ (trainer against transformers + peft)
#   tests/cudacpu/ (train_*.sh and their *.lua: the whole-run comparisons)
#   tests/lua/testlib.lua (the helpers those Lua files load)
#   tests/data/tiny_{distilbert,distilbert_cls,roberta_cls}/ (what train_families.sh trains)
#   tests/recipes/losses/ and data/ (STS-B train, SweNLI dev: what train_losses.sh trains on)
#   tests/data/tiny_bert/, tests/cli/cross_encoder_stsb.lua, data/{stsb_train,swenli_dev}.jsonl.gz
#     (what train_cross_encoder.sh trains)
# On the GPU machine: tar xzf trainer-gpu.tar.gz && OUT=... bash trainer-gpu/tests/gpu/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
stage=${1:?usage: gpu_bundle.sh STAGE BUILT}
built=${2:?usage: gpu_bundle.sh STAGE BUILT}
cuda_home=${CUDA_HOME:?gpu_bundle.sh: set CUDA_HOME}
max_mib=60

rm -rf "$stage" "$stage.tar.gz"
mkdir -p "$stage/lib" "$stage/bin" "$stage/tests/gpu"
cp "$built/trainer" "$stage/trainer"
cp "$built"/lib/*.so "$stage/lib/"
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
mkdir -p "$stage/tests/data"
cp -R tests/data/tiny_distilbert tests/data/tiny_distilbert_cls tests/data/tiny_roberta_cls "$stage/tests/data/"
# tests/cudacpu/train_losses.sh: the loss recipes and the shipped data they train on
mkdir -p "$stage/tests/recipes" "$stage/data"
cp -R tests/recipes/losses "$stage/tests/recipes/"
# train_cross_encoder.sh: its recipe, the tiny BERT it puts a head on, the shipped pairs it trains on
cp -R tests/data/tiny_bert "$stage/tests/data/"
mkdir -p "$stage/tests/cli" "$stage/data"
cp tests/cli/cross_encoder_stsb.lua "$stage/tests/cli/"
cp data/stsb_train.jsonl.gz data/swenli_dev.jsonl.gz "$stage/data/"
mkdir -p "$stage/bench/gpu"
cp bench/gpu/run.sh bench/gpu/trainer_side.lua bench/gpu/torch_side.py "$stage/bench/gpu/"
for f in "$built"/tests/* "$built"/bench/*; do [ -f "$f" ] && cp "$f" "$stage/bin/"; done
# Debug sections are for this machine; the bundle travels.
strip --strip-debug "$stage/trainer" "$stage"/lib/*.so "$stage"/bin/* 2>/dev/null || true

# A library stays outside the bundle when every CUDA machine has it: the C library and its
# parts, the dynamic loader, libm, libstdc++, libgcc's, the driver (libcuda), and cuBLAS and
# NCCL, which are hundreds of MiB (not even linked: the runtime dlopens cuBLASLt on the
# first GPU matrix product and NCCL on a distributed run, through the rpath to the CUDA
# toolkit's lib64 or LD_LIBRARY_PATH). The CUDA runtime (libcudart, < 1 MiB) travels.
system_lib() {
  case $1 in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*) return 0 ;;
    libcuda.so*|libcublas.so*|libcublasLt.so*|libnccl.so*|libnvrtc.so*) return 0 ;;
  esac
  return 1
}

# (the build's CUDA home is searched too: the rpath names only the GPU machine's usual
# folders, and the CUDA 12 home under build/ is none of them)
programs=("$stage/trainer" "$stage"/bin/*)
for prog in "${programs[@]}"; do
  [ -f "$prog" ] || continue
  while read -r name _ path _; do
    system_lib "$name" && continue
    [ -n "$path" ] && [ -f "$path" ] || { echo "gpu-bundle: $prog needs $name, which this machine cannot resolve" >&2; exit 1; }
    [ -e "$stage/lib/$name" ] || cp -L "$path" "$stage/lib/$name"
  done < <(LD_LIBRARY_PATH="$cuda_home/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$prog" | awk '$2 == "=>" { print $1, $2, $3, $4 }')
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

# What the bundle is for, read by a person choosing one and by tests/gpu/run.sh (key: value).
# The versions are the headers': cudart is linked from the same toolkit, and cuBLASLt is
# loaded by the soname its headers give (kernels/cuda/cublaslt_api.h).
header_define() { # header macro: the macro's number in CUDA_HOME/include/header
  sed -n "s/^#define $2[[:space:]][[:space:]]*\([0-9][0-9]*\).*/\1/p" "$cuda_home/include/$1" | head -1
}
cudart=$(header_define cuda_runtime_api.h CUDART_VERSION)
cublas_major=$(header_define cublas_api.h CUBLAS_VER_MAJOR)
[ -n "$cudart" ] && [ -n "$cublas_major" ] ||
  { echo "gpu-bundle: cannot read CUDART_VERSION or CUBLAS_VER_MAJOR under $cuda_home/include" >&2; exit 1; }
cuda_major=$((cudart / 1000))
# CUDA's minor-version compatibility: a runtime of major version M runs on any driver of M's
# first release or later.
case $cuda_major in 12) driver=525 ;; 13) driver=580 ;; *) driver="that of CUDA $cuda_major" ;; esac
{
  echo "cuda_runtime: $cuda_major.$(( (cudart % 1000) / 10 ))"
  echo "driver_min: $driver"
  echo "targets: ${CUDA_TARGETS:-unknown}"
  echo "cublaslt: libcublasLt.so.$cublas_major (not bundled: the CUDA $cuda_major toolkit's lib64, or pip's nvidia-cublas$([ "$cuda_major" = 12 ] && echo -cu12) on LD_LIBRARY_PATH)"
} >"$stage/BUNDLE.txt"

tar -C "$(dirname "$stage")" -czf "$stage.tar.gz" "$(basename "$stage")"
bytes=$(stat -c %s "$stage.tar.gz")
mib=$(( (bytes + 1048575) / 1048576 ))
lib_mib=$(( ($(stat -c %s "$stage/lib/libtrainer.so") + 1048575) / 1048576 ))
echo "gpu-bundle: $stage.tar.gz, $mib MiB (limit $max_mib); CUDA $cuda_major runtime, drivers >= $driver, ${CUDA_TARGETS:-}"
echo "gpu-bundle: lib/libtrainer.so $lib_mib MiB unpacked; $(ls "$stage/lib" | wc -l) libraries: $(ls "$stage/lib" | tr '\n' ' ')"
if [ "$mib" -gt "$max_mib" ]; then echo "gpu-bundle: larger than $max_mib MiB" >&2; exit 1; fi
