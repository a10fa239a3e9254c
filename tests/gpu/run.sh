#!/usr/bin/env bash
# tests/gpu/run.sh — the GPU checks in one script that builds, checks and times (how to run
# it: tests/gpu/NOTES.md). Ends within DEADLINE seconds (default 450): each stage has a time limit of its own
# (the op table's CUDA pass 90 s, its memcheck pass 120 s, ...), cut to what is left of the
# deadline, and a stage with under 20 s left is skipped and says so. The stages run in
# dependency order: the device itself (allocator, GEMM, kernels, transfers), the ops, the
# Lua side, training (parity, resume, one NCCL rank), and only then the benchmarks.
#
#   OUT=/some/dir bash tests/gpu/run.sh        # JOBS=16 by default
#
# 1. builds: `make -j$JOBS trainer` when the build dependencies are installed (the CUDA
#    objects then come from the Makefile, nvcc for the card's compute capability alone, CUDA_ARCHS); otherwise, or when that
#    fails, (a bare CUDA image without LuaJIT/OpenBLAS/...) a minimal build of just what
#    the GPU test needs, with the same nvcc flags, in parallel;
# 2. builds tests/gpu/test_gpu_parity.c (allocator, GEMM, elementwise, casts) and
#    tests/gpu/test_gpu_nn.c (every kernel of the kernels/cuda/ families against the CPU's
#    float64 kernels, dropout masks bit for bit) and tests/gpu/test_gpu_memory.c (tensor
#    transfers, fills, views, staging, the device allocator under stress, OOM and recovery,
#    safetensors to the device) with gcc -DTR_HAVE_CUDA against a static archive of those
#    objects (only the members they need are linked) and runs them, then
#    tests/gpu/test_device_lua.lua inside ./trainer (t:to, tolist, memory.stats("cuda:0"));
#    PASS/FAIL/SKIP lines and "N passed, N failed";
# 3. runs tests/gpu/train_parity.sh (training on the GPU against the CPU, exact resume);
#    and a one-rank NCCL training run against the same run without `distributed`;
# 4. builds and runs the benchmarks, bench/bench_cuda*.c first (every bench/bench_*.c in
#    make mode, only the CUDA ones in minimal mode), each under a time limit, while time
#    is left; their output goes to $OUT/bench.txt; then bench/gpu/run.sh (trainer against
#    transformers + peft) in what is left of the deadline, into $OUT/bench_gpu/.
# On a bare CUDA image: bash tests/gpu/prepare_deps.sh on the build machine, and copy
# build/gpu_deps along with the checkout; or run it from the bundle (make gpu-bundle), where
# everything is prebuilt:
#   tar xzf build/gpu-bundle/trainer-gpu.tar.gz -C /tmp && OUT=$OUT bash /tmp/trainer-gpu/tests/gpu/run.sh
# Writes $OUT/gpu_run.log (everything), $OUT/build.log and $OUT/bench.txt. Without a GPU
# the test prints SKIP and the script exits 0. Exit status: non-zero when a build or a
# GPU check failed.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/gpu_out}
JOBS=${JOBS:-16}
mkdir -p "$OUT" build/gpu
exec > >(tee "$OUT/gpu_run.log") 2>&1
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
stage() { echo "== $1 (t=$(elapsed)s)"; }
status=0
DEADLINE=${DEADLINE:-450}
# limit SECONDS: the time limit for a stage that wants SECONDS, cut to what is left of the
# deadline (at least 1: `timeout 0` would mean no limit at all); a caller skips its stage
# below 20 s.
limit() {
  local left=$((DEADLINE - $(elapsed)))
  if [ "$left" -lt 1 ]; then left=1; fi
  if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

NVCC=${NVCC:-$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
PKGS="luajit libedit zlib openblas jansson libutf8proc"
CORE_INCS="-Icore $(for d in core/*/; do printf -- '-I%s ' "${d%/}"; done)"
# The card's compute capability (nvidia-smi's compute_cap, "8.6" -> 86): a build here compiles
# for it alone (the Makefile's CUDA_ARCHS); 90 when nvidia-smi does not say.
CARD_CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
case "$CARD_CC" in [0-9][0-9] | [0-9][0-9][0-9]) ;; *) CARD_CC=90 ;; esac
NVCCFLAGS="-O2 -std=c++17 $CORE_INCS -Ikernels -DTR_HAVE_CUDA -gencode arch=compute_$CARD_CC,code=sm_$CARD_CC \
 -gencode arch=compute_$CARD_CC,code=compute_$CARD_CC -DTR_CUDA_TARGET_LIST=$CARD_CC -DTR_CUDA_PTX=$CARD_CC \
 -Xcompiler -fPIC,-Wall,-Werror"
CFLAGS="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter -O2 -g -fPIC $CORE_INCS -Ikernels \
 -DTR_HAVE_CUDA -I$CUDA_HOME/include"

# ---------------------------------------------------------------- machine
stage "machine"
# first: the card, its compute capability, the driver and the runtime
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm --format=csv 2>&1
  nvidia-smi 2>/dev/null | grep -m1 -o 'CUDA Version: [0-9.]*' | sed 's/^/driver supports /'
else
  echo "nvidia-smi: not available"
fi
echo "card compute capability used for builds here: sm_$CARD_CC"
# From the bundle (make gpu-bundle): the programs are prebuilt in bin/, nothing is compiled.
bundle=0
[ -x trainer ] && [ -d bin ] && [ ! -f Makefile ] && bundle=1
if [ "$bundle" = 1 ]; then
  echo "mode: bundle (prebuilt programs in bin/)"
  cat BUNDLE.txt 2>/dev/null
  # cuBLAS does not travel in the bundle. When the cuBLASLt it loads (BUNDLE.txt) is neither
  # known to the loader nor in a CUDA toolkit's lib64 (the rpath), a pip-installed one
  # (nvidia-cublas, nvidia-cublas-cu12) goes on LD_LIBRARY_PATH.
  lt=$(sed -n 's/^cublaslt: \([^ ]*\).*/\1/p' BUNDLE.txt 2>/dev/null)
  if [ -n "$lt" ] && ! ldconfig -p 2>/dev/null | grep -q "[[:space:]]$lt " && ! ls /usr/local/cuda*/lib64/"$lt" >/dev/null 2>&1; then
    lt_dir=$(python3 -c 'import glob, sys; print(next((p.rsplit("/", 1)[0] for d in sys.path for p in glob.glob(d + "/nvidia/*/lib/" + sys.argv[1])), ""))' "$lt" 2>/dev/null)
    if [ -n "$lt_dir" ]; then
      export LD_LIBRARY_PATH="$lt_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "cuBLASLt: $lt from $lt_dir (pip)"
    else
      echo "cuBLASLt: $lt not found: the matrix products will fail (BUNDLE.txt says where to get it)"
    fi
  fi
  # the card as the bundle's runtime sees it (trainer.core.card): name, compute capability,
  # the driver's and the runtime's CUDA versions
  ./trainer run <(echo 'local c = require("trainer.core.card").of("cuda:0")
    print(c and ("runtime: %s, compute capability %s, driver CUDA %s, runtime CUDA %s"):format(c.name, c.cc,
      tostring(c.driver), tostring(c.runtime)) or "runtime: no CUDA device visible to the bundle: " ..
      require("ffi").string(require("trainer.core.ffi").tr_cuda_unavailable_reason()))') 2>&1 | head -n 3
else
  "$NVCC" --version 2>&1 | tail -1 || echo "nvcc: not found at $NVCC"
  [ -x "$NVCC" ] || { echo "FAIL build: nvcc not found (set NVCC)"; echo "0 passed, 1 failed"; exit 1; }
fi

# ---------------------------------------------------------------- build
stage "build"
: >"$OUT/build.log"

build_make() { # the project's own build; sets objs, extra_cflags, extra_libs
  timeout "$(limit 240)" make -j"$JOBS" trainer CUDA_ARCHS="$CARD_CC" >>"$OUT/build.log" 2>&1 || return 1
  objs=$(find build/rel/core build/rel/kernels -name '*.o' 2>/dev/null | grep -v '/main\.o$' | sort)
  extra_cflags="-DTR_TEST_HAVE_CBLAS $(pkg-config --cflags $PKGS)"
  # the objects of a build with Open MPI call it (core/dist/dist_mpi.c)
  extra_libs="$(pkg-config --libs $PKGS) $(pkg-config --libs ompi-c 2>/dev/null) -fopenmp"
}

build_minimal() { # just what the GPU test needs, same nvcc flags; sets the same three
  rm -rf build/gpu/obj && mkdir -p build/gpu/obj
  # jansson (core/mem/alloc_report.c): copied into build/gpu_deps (tests/gpu/prepare_deps.sh),
  # or installed.
  local dep_cflags="" dep_libs="" f o pids=""
  if [ -f build/gpu_deps/lib/libjansson.a ]; then
    dep_cflags="-Ibuild/gpu_deps/include"; dep_libs="build/gpu_deps/lib/libjansson.a"
  elif pkg-config --exists jansson 2>/dev/null; then
    dep_cflags=$(pkg-config --cflags jansson); dep_libs=$(pkg-config --libs jansson)
  else
    echo "build: jansson missing: run tests/gpu/prepare_deps.sh on the build machine and copy build/gpu_deps here"
  fi
  # C sources: the runtime (core/) and the CPU kernels (the GPU tests' float64 references);
  # objects are named after their paths, so equal basenames in two folders cannot collide.
  csrc=$(ls core/*/*.c kernels/cpu/*.c 2>/dev/null | grep -v -e '^core/binding/')
  obj_of() { echo "build/gpu/obj/$(echo "$1" | tr / _).o"; }
  for f in kernels/cuda/*.cu; do
    o=$(obj_of "$f")
    ( "$NVCC" $NVCCFLAGS -c "$f" -o "$o" >"$o.log" 2>&1 && touch "$o.ok" ) &
    pids="$pids $!"
  done
  # A C file that does not compile here (it needs a missing header) is left out, which
  # only matters if a test needs it.
  for f in $csrc; do
    o=$(obj_of "$f")
    ( gcc $CFLAGS -fopenmp $dep_cflags -c "$f" -o "$o" >"$o.log" 2>&1 && touch "$o.ok" ) &
    pids="$pids $!"
  done
  # Wait for these pids only: a bare `wait` would also wait for the tee behind exec.
  for f in $pids; do wait "$f"; done
  cat build/gpu/obj/*.log >>"$OUT/build.log"
  objs=""
  for f in kernels/cuda/*.cu $csrc; do
    o=$(obj_of "$f")
    if [ -e "$o.ok" ]; then objs="$objs $o"
    elif [ "${f%.cu}" != "$f" ]; then echo "FAIL build: nvcc $f failed:"; cat "$o.log"; return 1
    else echo "build: left out $f (does not compile here)"; fi
  done
  extra_cflags=""
  extra_libs="$dep_libs -fopenmp"
}

if [ "$bundle" = 1 ]; then
  mode=bundle
  testbin=bin
else
  testbin=build/gpu
  mode=minimal
  if [ "${TR_GPU_MINIMAL:-0}" != 1 ] && pkg-config --exists $PKGS 2>/dev/null; then
    if build_make; then mode=make; else
      echo "WARN build: make -j$JOBS trainer failed (tail of build.log below); trying the minimal build"
      tail -15 "$OUT/build.log"
    fi
  else
    echo "build: minimal (TR_GPU_MINIMAL=1 or pkg-config lacks some of: $PKGS)"
  fi
  if [ "$mode" = minimal ] && ! build_minimal; then echo "0 passed, 1 failed"; exit 1; fi
  rm -f build/gpu/libtr_gpu.a
  ar rcs build/gpu/libtr_gpu.a $objs
  if nm build/gpu/libtr_gpu.a 2>/dev/null | grep -q ' T tr_f32_to_bf16$'; then
    extra_cflags="$extra_cflags -DTR_TEST_HAVE_CPU_CONVERT"
  fi
  # test_gpu_nn needs the CPU kernels, hence a BLAS: not in the minimal build.
  # test_gpu_dist: core/dist's NCCL path (the Makefile's build has it, the minimal one not)
  gpu_tests="test_gpu_parity test_gpu_nn test_gpu_memory test_gpu_dist"
  [ "$mode" = minimal ] && gpu_tests="test_gpu_parity test_gpu_memory"
  for t in $gpu_tests; do
    if ! gcc $CFLAGS -Itests/c $extra_cflags -o build/gpu/$t tests/gpu/$t.c \
         build/gpu/libtr_gpu.a -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lcudart_static \
         $extra_libs -lrt -lpthread -ldl -lm -lstdc++ >>"$OUT/build.log" 2>&1; then
      echo "FAIL build: $t did not build ($mode mode); see build.log:"; tail -30 "$OUT/build.log"
      echo "0 passed, 1 failed"; exit 1
    fi
  done
fi
echo "build: $mode mode done"

# ---------------------------------------------------------------- GPU parity
# test_ops_table --cuda: every op's CUDA slot (core/cuda_ops/) against its CPU slot for
# every dtype and shape of the table's cases, one PASS/FAIL line each with its error
# figures (the dropout ops bit for bit); then the f32 cases again under
# compute-sanitizer's memcheck when it is installed (a smaller pass: one dtype).
passed=0; failed=0; skipped=0; dist_skipped=0
[ "$mode" = bundle ] && gpu_tests="test_gpu_parity test_gpu_nn test_gpu_memory test_ops_table test_gpu_dist"
if [ "$mode" = make ] && gcc $CFLAGS -Itests/c $extra_cflags -o build/gpu/test_ops_table tests/c/test_ops_table.c \
     build/gpu/libtr_gpu.a -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lcudart_static \
     $extra_libs -lrt -lpthread -ldl -lm -lstdc++ >>"$OUT/build.log" 2>&1; then
  gpu_tests="$gpu_tests test_ops_table"
fi
SANITIZER=$(command -v compute-sanitizer 2>/dev/null || ls "$CUDA_HOME/bin/compute-sanitizer" 2>/dev/null)
count() { # file, exit status, name: adds the file's PASS/FAIL/SKIP lines to the totals
  local p f s
  p=$(grep -c '^PASS ' "$1"); f=$(grep -c '^FAIL ' "$1"); s=$(grep -c '^SKIP ' "$1")
  if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $3: exited with status $2 without a FAIL line (crash, sanitizer error, or 124 = timeout)"
    f=$((f + 1))
  fi
  # a skipped NCCL check (no libnccl here) must not hold back the benchmarks below
  if [ "$3" = test_gpu_dist ]; then dist_skipped=$s; s=0; fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}
for t in test_gpu_parity test_gpu_nn test_gpu_memory test_ops_table test_ops_table_memcheck test_gpu_dist; do
  stage "$t"
  base=${t%_memcheck}
  case " $gpu_tests " in *" $base "*) ;; *)
    echo "SKIP $t: not built in $mode mode (run from the bundle: make gpu-bundle)"
    skipped=$((skipped + 1)); continue ;;
  esac
  args=""; [ "$base" = test_ops_table ] && args="--cuda"
  if [ "$t" = test_ops_table_memcheck ]; then
    if [ -z "$SANITIZER" ]; then echo "SKIP $t: compute-sanitizer not found"; skipped=$((skipped + 1)); continue; fi
    if ! grep -q '^PASS ' "$OUT/test_ops_table.txt" 2>/dev/null; then
      echo "SKIP $t: no CUDA case ran above"; skipped=$((skipped + 1)); continue
    fi
    # memcheck's own findings fail the run (--error-exitcode); its PASS lines are not
    # counted a second time, only a FAIL or a sanitizer error
    lim=$(limit 120)
    if [ "$lim" -lt 20 ]; then echo "SKIP $t: past the deadline (DEADLINE=${DEADLINE} s)"; skipped=$((skipped + 1)); continue; fi
    timeout "$lim" "$SANITIZER" --tool memcheck --error-exitcode 99 --print-limit 20 $testbin/$base --cuda f32 \
      >"$OUT/$t.txt" 2>&1
    rc=$?
    tail -25 "$OUT/$t.txt"
    grep '^FAIL ' "$OUT/$t.txt" >"$OUT/$t.fail.txt"
    count "$OUT/$t.fail.txt" "$rc" "$t"
    continue
  fi
  want=150; [ "$base" = test_ops_table ] && want=90
  lim=$(limit $want)
  if [ "$lim" -lt 20 ]; then echo "SKIP $t: past the deadline (DEADLINE=${DEADLINE} s)"; skipped=$((skipped + 1)); continue; fi
  timeout "$lim" $testbin/$base $args >"$OUT/$t.txt" 2>&1
  rc=$?
  cat "$OUT/$t.txt"
  count "$OUT/$t.txt" "$rc" "$t"
done
# The Lua side of device memory (t:to, tolist, memory.stats("cuda:0"), OOM exit 2), inside
# the binary: there in the bundle and in make mode, not in the minimal build.
stage "test_device_lua"
if [ -x ./trainer ] && [ "$mode" != minimal ] && [ "$(limit 120)" -ge 20 ]; then
  timeout "$(limit 120)" ./trainer run tests/gpu/test_device_lua.lua >"$OUT/test_device_lua.txt" 2>&1
  rc=$?
  cat "$OUT/test_device_lua.txt"
  count "$OUT/test_device_lua.txt" "$rc" test_device_lua
else
  echo "SKIP test_device_lua: no ./trainer in $mode mode (run from the bundle: make gpu-bundle), or out of time"
  skipped=$((skipped + 1))
fi
[ "$failed" -eq 0 ] || status=1

# ---------------------------------------------------------------- training on the GPU
# tests/gpu/train_parity.sh: a tiny BERT's 5 fp32 steps against the CPU, MiniLM bf16 + LoRA,
# exact resume; then tests/cudacpu/train_*.sh with TRAINER=./trainer. Its SKIPs (no GPU, no ./trainer) are counted apart: they do not stop the
# benchmarks below.
stage "train_parity"
train_skipped=0
if [ "$(limit 240)" -ge 20 ]; then
  # then the whole-run comparisons that also run on the emulator (tests/cudacpu/train_*.sh,
  # the same scripts with this binary: fp32, bf16 + LoRA, accumulation, the batch feed, fp16's
  # loss scale, resume, encode/classify, the plan against the ledger)
  timeout "$(limit 240)" bash -c 'bash tests/gpu/train_parity.sh; s=$?
    for t in tests/cudacpu/train_*.sh; do [ -f "$t" ] || continue
      TRAINER=./trainer OUT="$1/train_checks" bash "$t" || s=1; done; exit $s' _ "$OUT" >"$OUT/train_parity.txt" 2>&1
  rc=$?
else
  echo "SKIP train_parity: past the deadline (DEADLINE=${DEADLINE} s)" >"$OUT/train_parity.txt"
  rc=0
fi
cat "$OUT/train_parity.txt"
p=$(grep -c '^PASS ' "$OUT/train_parity.txt"); f=$(grep -c '^FAIL ' "$OUT/train_parity.txt")
train_skipped=$(grep -c '^SKIP ' "$OUT/train_parity.txt")
if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
  echo "FAIL train_parity: exited with status $rc without a FAIL line (crash, or 124 = timeout)"
  f=$((f + 1))
fi
passed=$((passed + p)); failed=$((failed + f))
[ "$failed" -eq 0 ] || status=1

# ---------------------------------------------------------------- distributed, one rank
# A training run with distributed.backend = "nccl" on one GPU, without mpirun (a world of
# one): the whole path (trainer.dist, NCCL buckets on their own stream) gives the losses of
# the same run without `distributed`, bitwise (the mean over one rank is the gradient).
stage "distributed (NCCL, one rank)"
if [ "$(limit 60)" -lt 20 ]; then
  echo "SKIP dist_nccl_one_rank: past the deadline (DEADLINE=${DEADLINE} s)"; dist_skipped=$((dist_skipped + 1))
elif [ "$mode" != minimal ] && [ -x ./trainer ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  d=$OUT/dist_nccl && rm -rf "$d" && mkdir -p "$d"
  cat >"$d/mk.lua" <<EOF
require("trainer.models").tiny_folder("$d/tiny", { seed = 1 })
local f = assert(io.open("$d/train.jsonl", "w"))
for i = 1, 32 do f:write(('{"a": "the cat sat %d", "b": "a dog is %d", "s": %.2f}\n'):format(i, i % 5, (i % 7) / 7)) end
f:close()
EOF
  cat >"$d/r.lua" <<EOF
return { model = { from = "$d/tiny", dropout = 0 }, device = "cuda",
  data = { train = "$d/train.jsonl", columns = { "a", "b", "s" } }, loss = { name = "cosine" },
  batch = { size = 8 }, steps = 4, eval = { at_start = false }, save = { final = false }, log = { quiet = true } }
EOF
  cat >"$d/losses.lua" <<'EOF'
for l in io.lines(arg[1]) do print(require("trainer.core.json").decode(l).loss) end
EOF
  losses() { ./trainer run "$d/losses.lua" "$1"; }
  if ./trainer run "$d/mk.lua" >"$d/log" 2>&1 && timeout "$(limit 120)" ./trainer "$d/r.lua" out="$d/plain" >>"$d/log" 2>&1 \
     && timeout "$(limit 120)" ./trainer "$d/r.lua" out="$d/nccl" distributed.backend=nccl >>"$d/log" 2>&1; then
    if [ "$(losses "$d/plain/metrics.jsonl")" = "$(losses "$d/nccl/metrics.jsonl")" ] && \
       grep -q '"backend": "nccl"' "$d/nccl/summary.json"; then
      echo "PASS dist_nccl_one_rank_equals_plain"; passed=$((passed + 1))
    else
      echo "FAIL dist_nccl_one_rank_equals_plain: losses or backend differ"; failed=$((failed + 1))
      paste <(losses "$d/plain/metrics.jsonl") <(losses "$d/nccl/metrics.jsonl")
    fi
  elif grep -q "cannot load libnccl" "$d/log"; then
    echo "SKIP dist_nccl_one_rank: libnccl is not installed on this machine"; dist_skipped=$((dist_skipped + 1))
  else
    echo "FAIL dist_nccl_one_rank: a run failed:"; tail -5 "$d/log"; failed=$((failed + 1))
  fi
else
  echo "SKIP dist_nccl_one_rank: needs a GPU and the trainer binary (not the minimal build)"; dist_skipped=$((dist_skipped + 1))
fi
[ "$failed" -eq 0 ] || status=1


# ---------------------------------------------------------------- benchmarks
stage "benchmarks"
: >"$OUT/bench.txt"
# make mode: every bench through the Makefile; minimal mode: the CUDA ones (bench_cuda_*),
# linked like the test.
build_bench() { # src -> prints the binary's path, or nothing
  local src=$1 name; name=$(basename "$src" .c)
  if [ "$mode" = bundle ]; then
    [ -x "bin/$name" ] && echo "bin/$name"
  elif [ "$mode" = make ]; then
    timeout "$(limit 90)" make -j"$JOBS" "build/rel/bench/$name" >>"$OUT/build.log" 2>&1 && echo "build/rel/bench/$name"
  else
    case $name in bench_cuda*) ;; *) return ;; esac
    gcc $CFLAGS -O3 -march=native $extra_cflags -o "build/gpu/$name" "$src" build/gpu/libtr_gpu.a \
      -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lcudart_static $extra_libs \
      -lrt -lpthread -ldl -lm -lstdc++ >>"$OUT/build.log" 2>&1 && echo "build/gpu/$name"
  fi
}
# Only where a GPU answered (some check passed): a skipped check (compute-sanitizer not
# installed, a test not built in this mode) must not cost the benchmarks.
if [ "$passed" -gt 0 ]; then
  # The CUDA benchmarks first: they are what this machine is for.
  if [ "$mode" = bundle ]; then srcs=$(ls bin/bench_cuda* 2>/dev/null | sed 's|^bin/\(.*\)$|bench/\1.c|')
  else srcs="$(ls bench/bench_cuda*.c 2>/dev/null) $(ls bench/bench_*.c 2>/dev/null | grep -v '/bench_cuda')"; fi
  for src in $srcs; do
    if [ "$(elapsed)" -gt $((DEADLINE - 250)) ]; then echo "bench: out of time, skipping $src" | tee -a "$OUT/bench.txt"; continue; fi
    b=$(build_bench "$src")
    if [ -z "$b" ]; then echo "bench: $src not built ($mode mode; see build.log)" | tee -a "$OUT/bench.txt"; continue; fi
    echo "== $b" >>"$OUT/bench.txt"
    timeout "$(limit 60)" "$b" >>"$OUT/bench.txt" 2>&1 || echo "bench: $b exited with $?" >>"$OUT/bench.txt"
  done
  tail -45 "$OUT/bench.txt"
  # trainer against transformers + peft on this card (bench/gpu/run.sh), in the time left of
  # the deadline; PyTorch's columns are "-" where torch/transformers/peft are missing
  left=$(limit 100000)
  if [ -x trainer ] && [ "$left" -gt 90 ]; then
    stage "bench/gpu"
    timeout "$left" bash bench/gpu/run.sh --out "$OUT/bench_gpu" --budget $((left - 60)) ||
      echo "bench/gpu: exited with $?"
  else
    echo "bench/gpu: not run (no ./trainer, or ${left} s left)"
  fi
else
  echo "bench: skipped (no GPU check passed: no GPU, or every check failed)"
fi
skipped=$((skipped + train_skipped + dist_skipped))


stage "done"
if [ "$skipped" -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
exit $status
