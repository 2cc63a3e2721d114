#!/usr/bin/env bash
# Every GPU check of obcache, in order, each under a time limit, with its
# results written to $OUT (results.txt: the log; results.json: one entry per
# step). It is the run.sh of the GPU kit (scripts/gpu-kit.sh), where the
# programs are in bin/ and their libraries in lib/ beside it; tests/gpu/run.sh
# runs it on a build tree instead (OBC_GPU_BIN). docs/GPU.md.
#
#   env    the machine: GPU, driver, the cuBLAS found, `obcache version`
#   ops    every CUDA kernel against its C twin (gpu_ops)
#   runtime the CUDA runtime against the CPU runtime on random models: tiny,
#          SmolLM2-shaped, Llama-3.1-8B-shaped, fp32 and bf16 weights; logits,
#          K/V, captured Q/O/lse/A (gpu_runtime; tolerances in that program)
#   capture a NIAH trace of the kit's random-weight model (random.gguf, 4 MB)
#          captured on the GPU and on the CPU, both verified and analysed, their
#          recall tables compared within a stated tolerance (compare_reports.py)
#   sums   the capture's column sums and query statistics on the GPU against
#          the same capture with OBC_CAPTURE_SUMS=cpu (sums on the host), at
#          8K and 32K tokens: both traces verified, their analyses compared,
#          and the prefill times of the two printed side by side
#   replay the model replay of that trace's kept sets (4 scores x 3 budgets,
#          4 steps) on the GPU against the CPU's (compare_replays.py)
#   bench  prefill tokens/s and TFLOP/s at 8K and 32K tokens of the 8B shape
#          against a cuBLAS bf16 GEMM timed in the same run, capture overhead,
#          and the capture with its column sums on the device (their cost and
#          fp32 rate at the 8B shape)
#
# PASS means every step passed. Without a usable CUDA device every GPU step
# FAILS (a GPU machine whose driver is missing must not pass), unless
# --dry-run is given: then the GPU steps are skipped and the CPU parts run
# (the kit's programs and libraries, a capture and analysis on the CPU), which
# is how the kit is checked on a machine without a GPU.
#
# usage: run.sh [--dry-run]
# env:   OUT (default ./gpu-results), OBC_GPU_BIN (the programs' folder, default
#        bin/ beside this script), OBC_GPU_MODEL (default random.gguf beside it)
set -u
here=$(cd "$(dirname "$0")" && pwd)
dry=0
[ "${1:-}" = --dry-run ] && dry=1
bin=${OBC_GPU_BIN:-$here/bin}
out=${OUT:-$PWD/gpu-results}
mkdir -p "$out"
log=$out/results.txt
json=$out/results.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s.%N)
steps=()
# The capture step's model: the kit's random-weight model (SmolLM2's
# tokenizer, made by scripts/gpu-kit.sh), captured on each device.
model=${OBC_GPU_MODEL:-$here/random.gguf}
niah=(--model "$model" --haystack noise --length 2048 --depth 50 --rows 64 --decode 4 --store-attn)

# The kit's libraries first, then the machine's cuBLAS of the major version
# the programs were linked with (CUDA's lib64, or the pip wheel's folder).
[ -d "$here/lib" ] && export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cublas=$(ldd "$bin/obcache" 2> /dev/null | awk '/libcublas\.so/ { print $1; exit }')
if [ -n "$cublas" ] && ldd "$bin/obcache" | grep -q "$cublas => not found"; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-*/lib64 \
    $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2> /dev/null); do
    [ -f "$d/$cublas" ] && { export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; break; }
  done
fi
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

say() { echo "$*" | tee -a "$log"; }
# record NAME STATUS SECONDS RC: one step's entry for results.json.
record() {
  steps+=("{\"name\": \"$1\", \"status\": \"$2\", \"seconds\": $3, \"rc\": $4}")
  say "--- $1: $2 (${3} s)"
}
# step NAME LIMIT GPU COMMAND...: runs COMMAND under LIMIT seconds. GPU=1:
# the step needs a GPU (skipped in a dry run; exit 77, "no CUDA device", fails).
step() {
  local name=$1 limit=$2 gpu=$3
  shift 3
  say ""
  say "=== $name (at $(printf '%.0f' "$(echo "$(date +%s.%N) - $start" | bc)") s): $*"
  if [ "$gpu" = 1 ] && [ "$dry" = 1 ]; then
    record "$name" skipped 0 0
    return 0
  fi
  local t0 rc
  t0=$(date +%s.%N)
  if declare -F "$1" > /dev/null; then # a function of this script: in a bash of its own
    timeout "$limit" bash -c "$(declare -f "$1"); $(declare -p bin tmp model niah here); \"\$@\"" \
      _ "$@" >> "$log" 2>&1
  else
    timeout "$limit" "$@" >> "$log" 2>&1
  fi
  rc=$?
  local seconds
  seconds=$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")
  tail -n 30 "$log" | sed -n '/^=== /,$p' | tail -n +2
  if [ $rc -eq 0 ]; then
    record "$name" pass "$seconds" $rc
  else
    local why=""
    [ $rc -eq 124 ] && why=" (over its ${limit} s)"
    [ $rc -eq 77 ] && why=" (no usable CUDA device)"
    record "$name" "fail$why" "$seconds" $rc
  fi
}

: > "$log"
say "obcache GPU checks$([ $dry = 1 ] && echo ' (dry run: GPU steps skipped)'), $(date -u +%FT%TZ), $(uname -m), $(nproc) cores"
env_info() {
  "$bin/obcache" version || return 1
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader
  echo "libraries: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ! ldd "$bin/obcache" | grep "not found"
}
step env 30 0 env_info
step ops 120 1 "$bin/gpu_ops"
step runtime 240 1 "$bin/gpu_runtime"

# capture_on DEVICE: capture, verify and analyse the random model's trace.
capture_on() {
  "$bin/obcache" capture "${niah[@]}" --device "$1" -o "$tmp/$1.h5" > /dev/null &&
    "$bin/obcache" verify "$tmp/$1.h5" &&
    "$bin/obcache" analyze "$tmp/$1.h5" -o "$tmp/$1-analysis" > /dev/null
}
step "capture cpu" 180 0 capture_on cpu
step "capture cuda" 120 1 capture_on cuda
step "capture: cuda vs cpu" 30 1 python3 "$here/compare_reports.py" \
  "$tmp/cuda-analysis/report.json" "$tmp/cpu-analysis/report.json"
# sums_gpu_vs_cpu: a capture on the GPU with the sums on the device and one
# with them on the host (OBC_CAPTURE_SUMS=cpu), at 8K and 32K tokens; each
# verified and analysed, the analyses compared, the prefill times printed.
sums_gpu_vs_cpu() {
  local length place prefill
  for length in 8192 32768; do
    for place in device cpu; do
      local args=(--model "$model" --haystack noise --length "$length" --depth 50 --rows 64 --decode 4)
      OBC_CAPTURE_SUMS=$place "$bin/obcache" capture "${args[@]}" --device cuda \
        -o "$tmp/sums-$place-$length.h5" > "$tmp/sums-$place-$length.txt" || return 1
      prefill=$(sed -n 's/^time: prefill \([0-9.]*\) s.*/\1/p' "$tmp/sums-$place-$length.txt")
      echo "sums on the $place at $length tokens: prefill $prefill s" \
        "($(grep -c '^column sums: on the device' "$tmp/sums-$place-$length.txt") = sums on the GPU)"
      "$bin/obcache" verify "$tmp/sums-$place-$length.h5" > /dev/null || return 1
      "$bin/obcache" analyze "$tmp/sums-$place-$length.h5" -o "$tmp/sums-$place-$length" > /dev/null || return 1
    done
    grep -q '^column sums: on the device' "$tmp/sums-device-$length.txt" || { echo "the GPU capture kept its sums on the host"; return 1; }
    python3 "$here/compare_reports.py" "$tmp/sums-device-$length/report.json" \
      "$tmp/sums-cpu-$length/report.json" || return 1
  done
}
step "sums: gpu vs cpu" 240 1 sums_gpu_vs_cpu
# replay_on DEVICE: the model replay of the CPU trace's kept sets on DEVICE.
replay_on() {
  "$bin/obcache" replay --sweep "$tmp/cpu.h5" --model "$model" --scores attn,obc_vk,oracle@1,random \
    --budgets 5%,20%,50% --steps 4 --device "$1" --batch 1 -o "$tmp/replay-$1" > /dev/null
}
step "replay cpu" 120 0 replay_on cpu
step "replay cuda" 120 1 replay_on cuda
step "replay: cuda vs cpu" 30 1 python3 "$here/compare_replays.py" \
  "$tmp/replay-cuda/replay_cells.csv" "$tmp/replay-cpu/replay_cells.csv"
step bench 360 1 "$bin/gpu_bench" all

total=$(printf '%.0f' "$(echo "$(date +%s.%N) - $start" | bc)")
failed=$(printf '%s\n' "${steps[@]}" | grep -c '"status": "fail' || true)
verdict=PASS
[ "$failed" -gt 0 ] && verdict=FAIL
{
  echo "{\"verdict\": \"$verdict\", \"dry_run\": $([ $dry = 1 ] && echo true || echo false),"
  echo " \"seconds\": $total, \"steps\": ["
  for i in "${!steps[@]}"; do
    printf '  %s%s\n' "${steps[$i]}" "$([ "$i" -lt $((${#steps[@]} - 1)) ] && echo ,)"
  done
  echo "]}"
} > "$json"
say ""
say "$verdict in $total s ($failed failed); results in $log and $json"
[ "$verdict" = PASS ]
