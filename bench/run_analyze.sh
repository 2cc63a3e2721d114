#!/usr/bin/env bash
# Benchmark of `obcache analyze` (not a test). Builds a SmolLM2-shaped
# synthetic trace (30 layers, 9 heads, 3 KV heads, d=64, s=8192, 128 rows,
# 16 decode steps), times `obcache analyze` and the NumPy transcription of the
# paper's pseudo-code (bench/analyze_numpy.py) for the same windows, checks
# that their main-window scores agree, prints the time ratio, and reports the
# peak RSS of `obcache analyze` on the Llama-3.1-8B-shaped trace when one is
# there (LLAMA_TRACE, default build-traces/llama8b.h5).
#
# usage: bench/run_analyze.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OBCACHE=$BUILD/obcache
WORK=${BENCH_WORK:-$BUILD/bench-analyze}
WINDOWS=${WINDOWS:-64,1,2,4,8,16,32,128}
LLAMA_TRACE=${LLAMA_TRACE:-build-traces/llama8b.h5}
mkdir -p "$WORK"

TRACE=$WORK/smollm2.h5
if [ ! -s "$TRACE" ]; then
  echo "bench: synthesising $TRACE"
  "$OBCACHE" synth --shape smollm2 --prompt 8192 --rows 128 --decode 16 --seed 1 -o "$TRACE"
fi

# Wall time, CPU time (user + system) and peak RSS of a child process, from
# getrusage(RUSAGE_CHILDREN). CPU time is printed too because on a shared
# machine the wall time also measures the other users' load.
measure() {
  python3 - "$@" <<'PYEOF'
import resource, subprocess, sys, time
t = time.time()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
seconds = time.time() - t
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{seconds:.3f} {use.ru_utime + use.ru_stime:.3f} {use.ru_maxrss / 1024.0:.1f}")
PYEOF
}

echo "bench: obcache analyze (float, all cores) on $TRACE, windows $WINDOWS"
read -r t_c cpu_c rss_c < <(measure "$OBCACHE" analyze "$TRACE" -o "$WORK/smollm2-analysis" \
  --window "$WINDOWS" --scores-out "$WORK/smollm2-scores.h5" --quiet)
echo "  obcache analyze: $t_c s wall, $cpu_c s CPU, peak RSS $rss_c MiB"

echo "bench: NumPy pseudo-code (float32) on the same trace and windows"
read -r t_np cpu_np rss_np < <(measure python3 bench/analyze_numpy.py "$TRACE" --window "$WINDOWS" \
  --dtype float32 --out "$WORK/numpy.npz")
echo "  numpy: $t_np s wall, $cpu_np s CPU, peak RSS $rss_np MiB"

python3 - "$WORK/numpy.npz" "$WORK/smollm2-scores.h5" <<'PYEOF'
import sys, h5py, numpy as np
ref = np.load(sys.argv[1])
worst = {}
with h5py.File(sys.argv[2], "r") as f:
    for name in ["attn", "attn2", "vatp", "obc_v", "obc_k", "obc_vk",
                 "exact_v", "exact_k", "exact_vk", "remove"]:
        a, b = f[name][()], ref[name]
        # Error relative to each head's largest value: float32 NumPy loses
        # digits in VmO_2norm's cancellation, so entry-wise ratios of tiny
        # values are not meaningful.
        scale = np.abs(b).max(axis=-1, keepdims=True)
        worst[name] = float((np.abs(a - b) / np.maximum(scale, 1e-300)).max())
print("agreement (main window, max |obcache - numpy| / head max): " +
      ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
bad = {k: v for k, v in worst.items() if not v < 1e-2}
if bad:
    sys.exit(f"bench: obcache and NumPy disagree: {bad}")
PYEOF
python3 -c "print(f'speed-up of obcache analyze over NumPy: {$t_np / $t_c:.1f}x wall time, {$cpu_np / $cpu_c:.1f}x CPU time (load average now: $(cut -d' ' -f1 /proc/loadavg))')"

if [ -s "$LLAMA_TRACE" ]; then
  echo "bench: obcache analyze on $LLAMA_TRACE (Llama-3.1-8B shape)"
  read -r t_l cpu_l rss_l < <(measure "$OBCACHE" analyze "$LLAMA_TRACE" -o "$WORK/llama8b-analysis" --quiet)
  echo "  obcache analyze: $t_l s wall, $cpu_l s CPU, peak RSS $rss_l MiB (target < 2048 MiB)"
else
  echo "bench: $LLAMA_TRACE not found; peak RSS on the Llama-8B shape not measured"
fi
