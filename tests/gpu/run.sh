#!/usr/bin/env bash
# The GPU checks on a machine that can build obcache itself (nvcc and the
# -dev packages of scripts/setup.sh): builds obcache and tests/gpu with CUDA
# in BUILD_DIR, then runs the same checks as the GPU kit
# (tests/gpu/kit_run.sh, which says what each step checks and what PASS
# means) on those programs. On a GPU machine without the -dev packages, build
# the kit elsewhere with scripts/gpu-kit.sh and run its run.sh (docs/GPU.md).
#
# usage: tests/gpu/run.sh [BUILD_DIR] [--dry-run]   (default BUILD_DIR: build-gpu)
# env:   OBC_CUDA_ARCH (default "80;90"), JOBS (default: all cores), OUT,
#        OBC_SKIP_BUILD=1 (use the programs already built in BUILD_DIR)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/build-gpu
args=()
for a in "$@"; do
  case $a in
    --dry-run) args+=(--dry-run) ;;
    *) build=$a ;;
  esac
done
command -v nvcc > /dev/null || PATH=$PATH:/usr/local/cuda/bin
if [ "${OBC_SKIP_BUILD:-0}" != 1 ]; then
  command -v nvcc > /dev/null || { echo "tests/gpu/run.sh: nvcc not found" >&2; exit 3; }
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DOBC_CUDA=ON -DOBC_NATIVE=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="${OBC_CUDA_ARCH:-80;90}" > /dev/null
  cmake --build "$build" -j "${JOBS:-$(nproc)}" --target obcache gpu_ops gpu_runtime gpu_bench \
    > /dev/null
fi
model=${OBC_MODEL:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$build/random.gguf" ] ||
  python3 "$src/tests/make_random_gguf.py" kit Q8_0 "$model" "$build/random.gguf" > /dev/null
mkdir -p "$build/gpu-bin"
for p in obcache tests/gpu/gpu_ops tests/gpu/gpu_runtime tests/gpu/gpu_bench; do
  ln -sf "$build/$p" "$build/gpu-bin/$(basename "$p")"
done
OBC_GPU_BIN=$build/gpu-bin OBC_GPU_MODEL=${OBC_GPU_MODEL:-$build/random.gguf} \
  exec "$src/tests/gpu/kit_run.sh" "${args[@]}"
