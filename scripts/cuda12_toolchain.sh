#!/usr/bin/env bash
# scripts/cuda12_toolchain.sh [DIR] — installs the CUDA 12 toolchain that
# `make gpu-bundle-cuda12` builds with, under DIR (default build/cuda12), from PyPI's wheels
# and never system-wide; once: a second call with the same versions returns at once.
#
# What the wheels hold, and what this script adds (the Makefile wants a CUDA home with
# bin/nvcc, include/ and lib64/):
#   nvidia-cuda-nvcc-cu12     ptxas, libdevice, the crt headers; no nvcc, cudafe++, cicc or
#                             fatbinary (the CUDA 13 front end, which has them, no longer
#                             targets sm_70). So bin/nvcc is scripts/cuda12/nvcc, which
#                             compiles the CUDA C++ with clang (Debian's clang-19, apt-installed
#                             when missing), and bin/fatbinary is scripts/cuda12/fatbinary over
#                             CUDA 13's fatbinary (the installed toolkit's, else PyPI's).
#   nvidia-cuda-runtime-cu12  the runtime headers, libcudart.so.12 (bundled), libcudart_static.a
#   nvidia-cuda-cccl-cu12     the C++ headers cuda_fp16.h and friends include
#   nvidia-cublas-cu12        cublasLt.h and libcublasLt.so.12 (~600 MB: the bulk of the
#                             download; the bundle loads it at run time and does not carry it)
# No NCCL: its header is missing here, so the CUDA 12 build has no NCCL collectives.
#
# Layout: DIR/site (the unpacked wheels), DIR/home (the CUDA home: bin/ include/ lib64/
# nvvm/libdevice/ libexec/fatbinary, and the file `clang` naming the compiler).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/cuda12}
wheels="nvidia-cuda-nvcc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79 nvidia-cuda-cccl-cu12==12.9.27 nvidia-cublas-cu12==12.9.1.4"
clang=${CUDA12_CLANG:-clang-19}
home=$dir/home
want="$wheels $clang $(md5sum scripts/cuda12/nvcc scripts/cuda12/fatbinary | cut -c1-32 | tr '\n' ' ')"
if [ "$(cat "$home/.installed" 2>/dev/null)" = "$want" ]; then exit 0; fi
t0=$(date +%s)

if ! command -v "$clang" >/dev/null 2>&1; then
  echo "cuda12_toolchain: installing $clang (Debian) as the CUDA compiler"
  if [ "$(id -u)" != 0 ]; then echo "cuda12_toolchain: $clang is missing; as root: apt-get install $clang" >&2; exit 1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$clang" >/dev/null
fi

if [ "$(cat "$dir/site/.wheels" 2>/dev/null)" != "$wheels" ]; then
  echo "cuda12_toolchain: downloading $wheels into $dir/site (~1 GB)"
  rm -rf "$dir/site"
  # shellcheck disable=SC2086 # one argument per wheel
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$dir/site" $wheels
  echo "$wheels" >"$dir/site/.wheels"
fi

# CUDA 13's fatbinary: beside the installed nvcc, else from PyPI's CUDA 13 compiler wheel.
nvcc13=$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
fatbinary=$(dirname "$nvcc13")/fatbinary
if [ ! -x "$fatbinary" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$dir/cu13" nvidia-cuda-nvcc==13.0.88
  fatbinary=$dir/cu13/nvidia/cu13/bin/fatbinary
fi

rm -rf "$home"
mkdir -p "$home/bin" "$home/include" "$home/lib64" "$home/nvvm" "$home/libexec"
nv=$dir/site/nvidia
for part in cuda_runtime cuda_nvcc cuda_cccl cublas; do cp -R "$nv/$part/include/." "$home/include/"; done
cp -R "$nv/cuda_nvcc/nvvm/libdevice" "$home/nvvm/"
install -m 755 "$nv/cuda_nvcc/bin/ptxas" "$home/bin/ptxas"
install -m 755 scripts/cuda12/nvcc scripts/cuda12/fatbinary "$home/bin/"
install -m 755 "$fatbinary" "$home/libexec/fatbinary"
command -v "$clang" >"$home/clang"
# the libraries stay in the wheels' folders; lib64 links to them, with the unversioned names
# a linker (-lcudart) and the Makefile's cuBLASLt check look for
for lib in cuda_runtime/lib/libcudart_static.a cuda_runtime/lib/libcudart.so.12 cublas/lib/libcublasLt.so.12 cublas/lib/libcublas.so.12; do
  ln -s "$(cd "$nv" && pwd)/$lib" "$home/lib64/$(basename "$lib")"
done
ln -s libcudart.so.12 "$home/lib64/libcudart.so"
ln -s libcublasLt.so.12 "$home/lib64/libcublasLt.so"
ln -s libcublas.so.12 "$home/lib64/libcublas.so"

"$home/bin/nvcc" --version | sed 's/^/cuda12_toolchain: /'
echo "$want" >"$home/.installed"
echo "cuda12_toolchain: $home ready in $(($(date +%s) - t0)) s"
