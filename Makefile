# The two entry points of the README. Both install what is missing, configure
# and build with CMake, then either run the demo or the whole test suite.
# `make test` runs, in order: the format check, the whole CTest suite of the
# Release build, the sanitizer stage (scripts/sanitizer_tests.sh, from
# $(SAN_BUILD): GCC with ASan and UBSan) and the fuzz smoke (scripts/fuzz.sh,
# SMOKE_SECONDS per harness, from $(FUZZ_BUILD): clang with libFuzzer, ASan
# and UBSan).
BUILD ?= build
SAN_BUILD ?= build-san
FUZZ_BUILD ?= build-fuzz
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?=
SMOKE_SECONDS ?= 12
FUZZ_SECONDS ?= 60
FUZZ ?=
PREFIX ?= /usr/local

.PHONY: all setup build install san-build fuzz-build demo test fuzz bench format check-format clean

all: build

# scripts/setup.sh installs what building and running obcache needs; the tests
# and the developer targets set SETUP_FLAGS=--tests, which the setup they
# depend on inherits: the format checker, clang, Slurm and the Python
# references too.
test san-build fuzz-build format check-format: SETUP_FLAGS = --tests

setup:
	@scripts/setup.sh $(SETUP_FLAGS)

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# PREFIX/bin/obcache and what it reads at run time under PREFIX/share/obcache
# (the figure scripts, the default model): CMakeLists.txt, "make install".
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# The demo runs the setup and this build itself, as its first two stages, the
# build quietly (its output in $(BUILD)/build.log, printed if it fails).
demo:
	@JOBS=$(JOBS) CMAKE_FLAGS='$(CMAKE_FLAGS)' scripts/demo.sh --build $(BUILD)

# Two sanitizer trees, RelWithDebInfo for line numbers in reports, no CUDA
# (CMakeLists.txt, OBC_SANITIZE), -Werror as everywhere: clang's warnings
# differ from GCC's (-Wbitwise-instead-of-logical found unsequenced overflow
# checks in traces/synth.c). The tests run from a GCC tree: clang's OpenMP runtime (libomp
# 14) aborts at start-up under `ulimit -f 0`, which the disk-full tests use,
# where GCC's libgomp does not; float-cast-overflow is added to GCC's
# `undefined`, which lacks it (clang's has it). The fuzzers need clang.
san-build: setup
	@cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOBC_CUDA=OFF \
	  -DOBC_SANITIZE=address,undefined,float-cast-overflow >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)

fuzz-build: setup
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DOBC_CUDA=OFF -DOBC_SANITIZE=address,undefined -DOBC_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target obcache fuzzers

# Each stage says how long it took (CONTRIBUTING.md, "Test"). The fuzz smoke
# replays every seed and regression input of each harness, then fuzzes for
# the rest of SMOKE_SECONDS: a harness that breaks shows in its seeds, and
# the longer search is `make fuzz`'s (in 60 s runs from a grown corpus,
# 2026-12-06, the coverage reached at 20 s was within 4% of the final one,
# every harness; from the seeds alone, 12 s reached 95.6 to 100.4% of 20 s's
# coverage, every harness, 2026-12-06).
test: build
	@scripts/check_format.sh
	@t=$$(date +%s) && cd $(BUILD) && ctest --output-on-failure -j $(JOBS) && \
	  echo "make test: suite passed in $$(($$(date +%s) - t)) s"
	@t=$$(date +%s) && $(MAKE) --no-print-directory san-build && \
	  echo "make test: sanitizer build in $$(($$(date +%s) - t)) s"
	@t=$$(date +%s) && JOBS=$(JOBS) scripts/sanitizer_tests.sh $(SAN_BUILD) && \
	  echo "make test: sanitizer stage passed in $$(($$(date +%s) - t)) s"
	@t=$$(date +%s) && $(MAKE) --no-print-directory fuzz-build && \
	  echo "make test: fuzz build in $$(($$(date +%s) - t)) s"
	@t=$$(date +%s) && FUZZ_SEED=1 scripts/fuzz.sh $(FUZZ_BUILD) $(SMOKE_SECONDS) && \
	  echo "make test: fuzz smoke passed in $$(($$(date +%s) - t)) s"

# Every harness (or those named in FUZZ, e.g. FUZZ="trace keep_file") for
# FUZZ_SECONDS each, two at a time; the corpus grows in $(FUZZ_BUILD)/fuzz.
fuzz: fuzz-build
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ)

bench: build
	@cmake --build $(BUILD) -j $(JOBS) --target benchmarks
	@bench/run.sh $(BUILD)

# Reformat every tracked C/H/CUDA file as .clang-format says; check-format
# only lists the files that differ (`make test` runs it first).
format: setup
	@scripts/check_format.sh --fix

check-format: setup
	@scripts/check_format.sh

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(FUZZ_BUILD)
