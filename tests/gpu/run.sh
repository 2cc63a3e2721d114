#!/bin/bash
# The GPU checks of the CUDA backend in one script (see README, "GPU"):
#   0. builds obcache and tests/gpu with CUDA (needs nvcc);
#   (a) kernels vs. their C twins (gpu_ops) and the CUDA runtime vs. the CPU
#       runtime on a tiny random model and SmolLM2 (gpu_runtime): logits, K/V,
#       captured Q/O/lse/A, with the tolerances stated in those programs;
#   (b) a NIAH trace captured on the GPU and on the CPU, both checked with
#       `obcache verify`, both analysed, and their recall figures compared;
#   (c) the prefill benchmark (gpu_bench): SmolLM2 and a Llama-3.1-8B-shaped
#       random model at 8K and 32K tokens, tokens/s, TFLOP/s against the bf16
#       peak, capture overhead.
# Without a CUDA device it prints "SKIPPED: no CUDA device" and exits 0.
# Meant to finish in under 8 minutes on one H200.
# usage: tests/gpu/run.sh [BUILD_DIR]   (default: build-gpu under the source tree)
# env:   OBC_CUDA_ARCH (default 90: H100/H200), JOBS (default: all cores),
#        OBC_SKIP_BUILD=1 (use the programs already built in BUILD_DIR),
#        OBC_MODEL (SmolLM2 GGUF; its parts are skipped when it is absent)
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build-gpu}
arch=${OBC_CUDA_ARCH:-90}
jobs=${JOBS:-$(nproc)}
start=$(date +%s)
failed=()

step() { printf '\n=== %s (at %ds)\n' "$1" $(($(date +%s) - start)); }
run_step() { # name timeout command...
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@"
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "--- $name: FAILED (exit $rc$([ $rc -eq 124 ] && echo ", over ${limit}s"))"
    failed+=("$name")
  fi
  return $rc
}

step "build with CUDA (arch $arch) in $build"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
if [ "${OBC_SKIP_BUILD:-0}" = 1 ] && [ -x "$build/obcache" ] && [ -x "$build/tests/gpu/gpu_bench" ]; then
  echo "OBC_SKIP_BUILD=1: using the programs already in $build"
else
  if ! command -v nvcc >/dev/null 2>&1; then
    echo "SKIPPED: no CUDA device (and no nvcc to build the CUDA backend)"
    exit 0
  fi
  mkdir -p "$build"
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DOBC_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; echo "FAIL: cmake"; exit 1; }
  cmake --build "$build" -j"$jobs" --target obcache gpu_ops gpu_runtime gpu_bench 2>&1 | tail -3
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "FAIL: build"; exit 1; }
fi
obcache=$build/obcache
gpu=$build/tests/gpu

"$gpu/gpu_ops" >/tmp/obc_gpu_probe.$$ 2>&1
probe=$?
if [ $probe -eq 77 ]; then
  cat /tmp/obc_gpu_probe.$$
  rm -f /tmp/obc_gpu_probe.$$
  echo "SKIPPED: no CUDA device"
  exit 0
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

step "(a) CUDA kernels vs. C twins"
cat /tmp/obc_gpu_probe.$$
rm -f /tmp/obc_gpu_probe.$$
[ $probe -eq 0 ] || failed+=("gpu_ops")

step "(a) CUDA runtime vs. CPU runtime"
run_step gpu_runtime 180 "$gpu/gpu_runtime"

step "(b) NIAH trace on the GPU and on the CPU, verify, analyse"
model=${OBC_MODEL:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
niah=(--model "$model" --haystack noise --length 4096 --depth 50 --rows 64 --decode 4 --store-attn)
if [ ! -f "$model" ]; then
  echo "SKIPPED (b): $model is not present (scripts/setup.sh fetches it; 98 MB, more than a"
  echo "device call can carry, so copy it by other means onto an offline GPU machine)"
else
run_step "capture --device cuda" 120 "$obcache" capture "${niah[@]}" --device cuda -o "$tmp/gpu.h5" &&
  run_step "verify (gpu trace)" 120 "$obcache" verify "$tmp/gpu.h5"
run_step "capture --device cpu" 180 "$obcache" capture "${niah[@]}" --device cpu -o "$tmp/cpu.h5" &&
  run_step "verify (cpu trace)" 120 "$obcache" verify "$tmp/cpu.h5"
if [ -f "$tmp/gpu.h5" ] && [ -f "$tmp/cpu.h5" ]; then
  run_step "analyze (gpu trace)" 120 "$obcache" analyze "$tmp/gpu.h5" -o "$tmp/gpu-analysis" >/dev/null
  run_step "analyze (cpu trace)" 120 "$obcache" analyze "$tmp/cpu.h5" -o "$tmp/cpu-analysis" >/dev/null
  # Same recall figures up to ties that rounding may break: report the largest
  # difference of every number in the two reports (timings left out).
  python3 - "$tmp/gpu-analysis/report.json" "$tmp/cpu-analysis/report.json" <<'EOF' ||
import json, sys
def leaves(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if "second" not in k and "time" not in k:
                yield from leaves(v, path + "/" + k)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from leaves(v, f"{path}[{i}]")
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield path, float(x)
a = dict(leaves(json.load(open(sys.argv[1]))))
b = dict(leaves(json.load(open(sys.argv[2]))))
common = sorted(set(a) & set(b))
worst = max(common, key=lambda k: abs(a[k] - b[k]), default=None)
if worst is None:
    sys.exit("no common numbers in the two reports")
print(f"GPU vs CPU analysis: {len(common)} numbers, largest difference {abs(a[worst] - b[worst]):.3g} "
      f"at {worst} ({a[worst]:.6g} vs {b[worst]:.6g})")
EOF
    failed+=("compare analyses")
fi
fi

step "(c) prefill benchmark (bf16 weights)"
run_step gpu_bench 300 "$gpu/gpu_bench" all

step "done in $(($(date +%s) - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[*]}"
  exit 1
fi
echo "PASS"
