#!/usr/bin/env bash
# tools/cudacpu/tests/run_cublaslt.sh OUT [bench [OTHER_LIB]] — the cuBLASLt stand-in's tests
# against OUT/lib64/libcublasLt.so.13 (built by `make -C tools/cudacpu OUT=...`).
#   OUT             builds tests/test_cublaslt*.c into OUT/tests and runs the tests: PASS/FAIL/SKIP
#                   lines, exit status non-zero on any failure (the test's own or a build failure).
#   OUT bench [LIB] the 1024^3 f32/bf16 GFLOP/s table, alternating with LIB (another
#                   libcublasLt.so.13, e.g. a build of the naive reference) when given.
set -u
out=${1:?usage: run_cublaslt.sh OUT [bench [OTHER_LIB]]}
out=$(cd "$out" 2>/dev/null && pwd) || { echo "FAIL cublaslt_build: no folder $1"; exit 1; }
here=$(cd "$(dirname "$0")/.." && pwd)
lib=$out/lib64/libcublasLt.so.13
if [ ! -f "$lib" ]; then echo "FAIL cublaslt_build: $lib missing (make -C tools/cudacpu OUT=$out)"; exit 1; fi
mkdir -p "$out/tests"
cflags="-std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -I$here/include"
if [ "${2:-}" = bench ]; then
    cc $cflags "$here/tests/test_cublaslt_bench.c" -o "$out/tests/test_cublaslt_bench" -ldl || { echo "FAIL cublaslt_bench_build"; exit 1; }
    exec "$out/tests/test_cublaslt_bench" "$lib" "${3:--}"
fi
if ! cc $cflags "$here/tests/test_cublaslt.c" -o "$out/tests/test_cublaslt" -L"$out/lib64" -Wl,-rpath,"$out/lib64" \
    -lcublasLt -lm 2>"$out/tests/test_cublaslt.build.log"; then
    echo "FAIL test_cublaslt_build: $(head -c 400 "$out/tests/test_cublaslt.build.log" | tr '\n' ' ')"
    exit 1
fi
"$out/tests/test_cublaslt"
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || echo "FAIL test_cublaslt: exited with status $rc (crash?)"
# a library without the fused epilogues (CUDACPU_LT_EPILOGUES), and a refused setting
CUDACPU_LT_EPILOGUES=bias "$out/tests/test_cublaslt" --epilogues-bias || rc=1
CUDACPU_LT_EPILOGUES=some "$out/tests/test_cublaslt" --epilogues-bias >/dev/null 2>"$out/tests/epilogues_bad.txt"
bad=$?
if [ $bad -eq 2 ] && grep -q "CUDACPU_LT_EPILOGUES=some is not valid" "$out/tests/epilogues_bad.txt"; then
    echo "PASS refuse_lt_epilogues_setting"
else
    echo "FAIL refuse_lt_epilogues_setting: status $bad: $(head -c 200 "$out/tests/epilogues_bad.txt")"; rc=1
fi
exit $rc
