# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(abspath $(VENV))/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export CCACHE_DIR ?= $(HOME)/.cache/ccache
export PIP_CACHE_DIR ?= $(HOME)/.cache/pip
# Relative paths in ccache keys: a fresh clone elsewhere still hits the cache.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_SLOPPINESS := pch_defines,time_macros,include_file_mtime,include_file_ctime
PLUGIN = $(shell $(BIN)/python -c "import importlib.util,os;print(os.path.join(os.path.dirname(importlib.util.find_spec('xla_plugins.xla_cpu_pjrt').origin),'xla_cpu_pjrt.so'))")
# A second, newer XLA:CPU plugin (PJRT C API 0.115, built from a recent XLA) that make test also
# runs a subset on. Its wheel asks for jax, which torchtpu does not use: installed without deps.
NEWER_PLUGIN_PKG := lammps-jax-pjrt-cpu==0.11.2
NEWER_PLUGIN = $(shell $(BIN)/python -c "import importlib.util,os;print(os.path.join(os.path.dirname(importlib.util.find_spec('lammps_jax_pjrt_cpu').origin),'pjrt_c_api_cpu_plugin.so'))")

# Test processes per pytest pass (pytest-xdist): compiling is single-threaded, so two workers on
# two cores halve the wall time.
TEST_WORKERS ?= 2
PYTEST = $(BIN)/python -m pytest -q -n $(TEST_WORKERS)

.PHONY: all demo test build system-deps cpp-test py-test tsan coverage bench gpu-check lint clean

all: build

# Debian packages the build needs (compiler, GoogleTest), installed only if missing; ccache only
# speeds rebuilds up, so failing to install it is not an error.
system-deps:
	@missing=""; \
	command -v g++ >/dev/null || missing="$$missing g++"; \
	[ -f /usr/include/gtest/gtest.h ] || missing="$$missing libgtest-dev"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@command -v ccache >/dev/null || $(SUDO) apt-get install -y -qq ccache >/dev/null 2>&1 || \
	  ($(SUDO) apt-get update -qq >/dev/null 2>&1 && $(SUDO) apt-get install -y -qq ccache >/dev/null 2>&1) || \
	  echo "ccache not installed: building without it"

$(VENV)/.deps: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(VENV)/.newer-plugin: $(VENV)/.deps
	$(BIN)/pip install -q --no-deps $(NEWER_PLUGIN_PKG)
	touch $@

build: system-deps $(VENV)/.deps
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 $(BIN)/pip install -q --no-build-isolation --no-deps -e .

cpp-test: build
	cd build/py && TORCHTPU_PJRT_PLUGIN=$(PLUGIN) $(BIN)/ctest --output-on-failure -j2

# The C++ tests (no PyTorch) under ThreadSanitizer, in a build folder of their own. The PJRT
# plugin is not instrumented: races inside it are out of sight, races on our state are not.
tsan: system-deps $(VENV)/.deps
	cmake -S . -B build/tsan -DTORCHTPU_BUILD_EXTENSION=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DPython3_EXECUTABLE=$(BIN)/python -DCMAKE_CXX_FLAGS=-fsanitize=thread \
	  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread
	cmake --build build/tsan -j2 --target tpu_cc_tests
	cd build/tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  TORCHTPU_PJRT_PLUGIN=$(PLUGIN) ./tpu_cc_tests

py-test: build
	TORCHTPU_MODE=fused $(PYTEST) tests
	TORCHTPU_MODE=strict $(PYTEST) tests -m "not pytorch_suite"

# Each size or count that switches a code path, at its most aggressive value: donate every
# buffer, cut programs every 16 ops, detect only short loops, keep one entry in every cache and
# table (interned graphs, bounded programs, scalars, op recipes, loaded programs), the tightest
# bounds that widen the most, poll check flags at every op, one in-flight program per device.
AGGRESSIVE = TORCHTPU_DONATE_MIN_BYTES=1 TORCHTPU_FUSED_MAX_OPS=16 TORCHTPU_LOOP_HISTORY=32 \
  TORCHTPU_INTERNED_GRAPHS=1 TORCHTPU_BOUNDED_MEMBERS=1 TORCHTPU_KEPT_SCALARS=1 \
  TORCHTPU_SCALAR_PRUNE_AT=1 TORCHTPU_OP_CACHE_RECIPES=1 TORCHTPU_MAX_LOADED_PROGRAMS=2 \
  TORCHTPU_MIN_BOUND=1 TORCHTPU_WIDE_BOUND=1024 TORCHTPU_CHECK_POLL_AT=1 TORCHTPU_INFLIGHT_SLOTS=1

# The suite runs once, split between the two modes that run programs differently: even-numbered
# tests of each file in fused mode (the default; with PyTorch's distributed suite), odd-numbered
# ones in strict mode. Then every 20th test of each file on the second plugin.
test: build $(VENV)/.newer-plugin
	@echo "== C++ unit tests (CTest) =="
	cd build/py && TORCHTPU_PJRT_PLUGIN=$(PLUGIN) $(BIN)/ctest --output-on-failure -j2
	@echo "== Python tests (pytest), fused mode: tests 0, 2, 4, ... of each file =="
	TORCHTPU_MODE=fused TORCHTPU_TEST_SHARD=0/2 $(PYTEST) tests
	@echo "== Python tests (pytest), strict mode: tests 1, 3, 5, ... of each file =="
	TORCHTPU_MODE=strict TORCHTPU_TEST_SHARD=1/2 $(PYTEST) tests -m "not pytorch_suite"
	@echo "== Python tests (pytest), fused mode, newer XLA:CPU plugin ($(NEWER_PLUGIN_PKG)): every 20th test of each file =="
	TORCHTPU_MODE=fused TORCHTPU_PJRT_PLUGIN=$(NEWER_PLUGIN) TORCHTPU_TEST_SHARD=0/20 \
	  $(PYTEST) tests -m "not pytorch_suite"
	@echo "== Model tests, fused mode, every threshold at its most aggressive (README: Environment variables) =="
	TORCHTPU_MODE=fused $(AGGRESSIVE) $(PYTEST) tests/test_models.py tests/test_donation.py \
	  tests/models/test_hf_models.py

demo: build
	$(BIN)/python examples/finetune_llama.py

coverage: build
	$(BIN)/python -m torchtpu.coverage --json --markdown docs/COVERAGE.md --expected tests/opinfo_expected.json

bench: build
	$(BIN)/python benchmarks/op_overhead.py
	$(BIN)/python benchmarks/llama_train.py
	$(BIN)/python benchmarks/llama_profile.py
	$(BIN)/python benchmarks/xla_cpu_kernels.py

# On a machine with an NVIDIA GPU: build against its torch, test on XLA:GPU, and the Llama step
# beside PyTorch CUDA eager and Inductor (tools/gpu_check.sh says what it needs).
gpu-check:
	tools/gpu_check.sh

lint: $(VENV)/.deps
	$(BIN)/ruff check torchtpu tests benchmarks examples tools
	clang-format --dry-run --Werror $$(git ls-files 'csrc/*.cc' 'csrc/*.h' 'tests/cpp/*')

clean:
	rm -rf build
