# gpu_bundle_checks.sh — sourced after lib.sh and cuda_targets.sh by the tests of a built GPU
# bundle (test_gpu_bundle.sh: CUDA 13; test_cuda12_bundle.sh: CUDA 12). One function:
#   check_bundle NAME TARBALL CUDA_MAJOR DRIVER_MIN "sm_75 ..." compute_N
# prints PASS/FAIL lines NAME_*: the tarball is at most 60 MiB; unpacked elsewhere, every
# program resolves its libraries inside it but libc, libm, libstdc++ and the driver; the
# runtime and its kernels are in lib/libtrainer.so once, which every program links;
# BUNDLE.txt names the CUDA version, the driver, the targets and the cuBLASLt soname;
# lib/libtrainer.so carries exactly those targets (cuobjdump; SKIP offline); the bundle's
# trainer runs a REPL through the FFI, trains a tiny model and encodes with it on the CPU
# from another folder; tests/gpu/run.sh runs in bundle mode and, without a GPU, skips.
# Leaves the unpacked bundle's folder in $BUNDLE.
check_bundle() {
  local name=$1 tarball=$2 cuda_major=$3 driver=$4 targets=$5 ptx=$6 bytes b lib_dir outside unshared rc
  bytes=$(stat -c %s "$tarball")
  if [ "$bytes" -le $((60 * 1048576)) ]; then pass "${name}_at_most_60_mib"; else fail "${name}_at_most_60_mib" "$bytes bytes"; fi
  rm -rf "$TMP/elsewhere" && mkdir -p "$TMP/elsewhere" && tar xzf "$tarball" -C "$TMP/elsewhere"
  b=$(echo "$TMP/elsewhere"/trainer-gpu*)
  BUNDLE=$b
  outside=$(ldd "$b/trainer" | awk '$2 == "=>" { print $1, $3 }' | while read -r lib path; do
    case $(readlink -f "$path") in "$(cd "$b/lib" && pwd -P)"/*) continue ;; esac
    # (libcublasLt is not allowed: the runtime dlopens it on a GPU's first matrix product)
    case $lib in libc.so*|libm.so*|libstdc++.so*|libpthread.so*|libdl.so*|librt.so*|libcuda.so*) continue ;; esac
    echo "$lib=$path"
  done)
  if [ -z "$outside" ]; then pass ${name}_ldd_resolves_inside; else fail ${name}_ldd_resolves_inside "$outside"; fi
  for prog in "$b"/bin/*; do
    if ldd "$prog" | grep -q "not found"; then fail ${name}_programs_link "$(basename "$prog"): $(ldd "$prog" | grep 'not found')"; fi
  done
  # The kernels travel once: every program takes the runtime from lib/libtrainer.so (and its
  # own copy of none: a program with the device code in it is over 10 MiB)
  lib_dir=$(cd "$b/lib" && pwd -P)
  unshared=$(for prog in "$b/trainer" "$b"/bin/*; do
    [ "$(readlink -f "$(ldd "$prog" | awk '$1 == "libtrainer.so" { print $3 }')")" = "$lib_dir/libtrainer.so" ] &&
      [ "$(stat -c %s "$prog")" -lt $((4 * 1048576)) ] ||
      echo "$(basename "$prog") ($(stat -c %s "$prog") bytes)"
  done)
  if [ -z "$unshared" ]; then pass ${name}_programs_share_libtrainer; else fail ${name}_programs_share_libtrainer "$unshared"; fi
  if grep -q "^cuda_runtime: $cuda_major\." "$b/BUNDLE.txt" && grep -q "^driver_min: $driver" "$b/BUNDLE.txt" &&
     grep -q "^targets: $targets $ptx\$" "$b/BUNDLE.txt" && grep -q "^cublaslt: libcublasLt.so.$cuda_major " "$b/BUNDLE.txt"; then
    pass ${name}_says_what_it_needs
  else
    fail ${name}_says_what_it_needs "BUNDLE.txt: $(tr '\n' ';' <"$b/BUNDLE.txt" 2>&1)"
  fi
  if find_cuobjdump "${name}_targets"; then
    expect_targets "${name}_targets" "$b/lib/libtrainer.so" "$targets" "$ptx"
  fi
  [ -x "$b/bin/test_gpu_parity" ] && [ -x "$b/bin/test_gpu_nn" ] && [ -x "$b/bin/test_gpu_memory" ] &&
    [ -f "$b/tests/gpu/test_device_lua.lua" ] && pass ${name}_has_gpu_tests ||
    fail ${name}_has_gpu_tests "$(ls "$b/bin" "$b/tests/gpu")"
  [ -f "$b/tests/gpu/train_parity.sh" ] && [ -f "$b/bench/gpu/run.sh" ] && [ -f "$b/bench/gpu/trainer_side.lua" ] &&
    [ -f "$b/bench/gpu/torch_side.py" ] && pass ${name}_has_training_checks ||
    fail ${name}_has_training_checks "train_parity.sh or bench/gpu/ missing"

  TRAINER="$b/trainer"
  run_trainer_stdin 'print(6*7); x = trainer.tensor.zeros({256}); print("bytes", trainer.memory.stats().allocated)' repl
  expect_out ${name}_trainer_runs_relocated 42
  expect_out ${name}_runtime_reached_through_ffi "bytes	"
  # a tiny model trained and encoded on the CPU by the bundle's binary alone, from another folder
  (cd "$TMP" && source "$ROOT/tests/cli/tiny_fixtures.sh") >"$TMP/fixtures.log" 2>&1 ||
    fail ${name}_fixtures "$(tail -3 "$TMP/fixtures.log")"
  cd "$TMP"
  run_trainer "$TMP/plain.lua" steps=3 save.every=3 out="$TMP/runs/$name" --quiet
  expect_rc ${name}_trains_on_cpu 0
  if [ -f "$TMP/runs/$name/summary.json" ]; then pass ${name}_training_wrote_summary; else fail ${name}_training_wrote_summary "no summary.json"; fi
  printf 'a cat\nthe dog sat on the mat\n' >"$TMP/texts.txt"
  run_trainer encode "$TMP/tiny" "$TMP/texts.txt"
  expect_rc ${name}_encode_rc 0
  if [ "$(grep -c '^\[' "$TMP/out")" = 2 ]; then pass ${name}_encode_writes_rows; else fail ${name}_encode_writes_rows "$(head -c 300 "$TMP/out")"; fi
  cd "$ROOT"
  (cd "$TMP" && OUT="$TMP/gpu_out_$name" bash "$b/tests/gpu/run.sh" >"$TMP/run.log" 2>&1)
  rc=$?
  if [ "$rc" = 0 ] && grep -q "mode: bundle" "$TMP/run.log" && grep -q "^0 passed, 0 failed, [1-9][0-9]* skipped" "$TMP/run.log" &&
     grep -q "^SKIP test_gpu_memory: no CUDA device" "$TMP/run.log" && grep -q "^SKIP test_device_lua: no CUDA device" "$TMP/run.log"; then
    pass ${name}_run_sh_skips_without_gpu
    if grep -q "^SKIP train_parity_tiny_fp32: no GPU" "$TMP/run.log"; then pass ${name}_train_parity_skips
    else fail ${name}_train_parity_skips "$(grep train_parity "$TMP/run.log" | head -3)"; fi
  else
    fail ${name}_run_sh_skips_without_gpu "rc $rc: $(tail -5 "$TMP/run.log")"
  fi
}
