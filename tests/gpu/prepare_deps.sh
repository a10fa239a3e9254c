#!/usr/bin/env bash
# tests/gpu/prepare_deps.sh — run on the build machine before the GPU checks: copies what
# tests/gpu/run.sh's minimal build needs and a bare CUDA image may lack (jansson's headers and
# static library, used by core/mem/alloc_report.c) into build/gpu_deps/ (ignored by git),
# to be copied to the GPU machine with the checkout.
set -euo pipefail
cd "$(dirname "$0")/../.."
dst=build/gpu_deps
rm -rf "$dst"
mkdir -p "$dst/include" "$dst/lib"
inc=$(pkg-config --variable=includedir jansson 2>/dev/null || echo /usr/include)
lib=$(pkg-config --variable=libdir jansson 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
cp "$inc/jansson.h" "$inc/jansson_config.h" "$dst/include/"
cp "$lib/libjansson.a" "$dst/lib/"
du -sh "$dst"
