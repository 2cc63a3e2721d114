# The two entry points of the README. Both install what is missing, configure
# and build with CMake, then either run the demo or the whole test suite.
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup build demo test bench format check-format clean

all: build

setup:
	@scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)/obcache

test: build
	@scripts/check_format.sh
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	@cmake --build $(BUILD) -j $(JOBS) --target benchmarks
	@bench/run.sh $(BUILD)

# Reformat every tracked C/H/CUDA file as .clang-format says; check-format
# only lists the files that differ (not yet part of `make test`).
format: setup
	@scripts/check_format.sh --fix

check-format: setup
	@scripts/check_format.sh

clean:
	rm -rf $(BUILD)
