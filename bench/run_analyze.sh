#!/usr/bin/env bash
# Benchmark of `obcache analyze` (not a test), everything in one run with the
# same thread count (THREADS, default 1) on one trace (TRACE, default the
# demo's demo-out/trace.h5; without it a SmolLM2-shaped synthetic trace of the
# same size is made):
#   - `obcache analyze` with one window (W = 64) and with the demo's 8 windows
#     (64,1,2,4,8,16,32,128), both with the demo's options (--recent 8
#     --oracle 1 --scores-out);
#   - the NumPy transcription of the paper's pseudo-code
#     (bench/analyze_numpy.py, float32) for the same windows, and the
#     agreement of the main window's scores;
#   - bench_analyze_floor: the FLOPs of the q.k and o.v products the analysis
#     needs, timed as sgemm calls of the analyser's shapes, and the trace file
#     read at the measured speed: the floor (docs/SCIENCE.md, "Cost of the
#     analysis").
# Prints wall and CPU seconds (on a shared machine the wall time also measures
# the other users' load), the speed-ups over NumPy, the achieved GFLOP/s next
# to sgemm's, and the time over the floor. Also the peak RSS of `obcache
# analyze` on the Llama-3.1-8B-shaped trace when one is there (LLAMA_TRACE,
# default build-traces/llama8b.h5).
#
# usage: bench/run_analyze.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OBCACHE=$BUILD/obcache
FLOOR=$BUILD/bench/bench_analyze_floor
WORK=${BENCH_WORK:-$BUILD/bench-analyze}
THREADS=${THREADS:-1}
MAIN_WINDOW=64
WINDOWS=${WINDOWS:-64,1,2,4,8,16,32,128}
TRACE=${TRACE:-demo-out/trace.h5}
LLAMA_TRACE=${LLAMA_TRACE:-build-traces/llama8b.h5}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$WORK"
cmake --build "$BUILD" --target obcache bench_analyze_floor -j2 > /dev/null

if [ ! -s "$TRACE" ]; then
  TRACE=$WORK/smollm2-4096.h5
  if [ ! -s "$TRACE" ]; then
    echo "bench: no demo trace; synthesising $TRACE (SmolLM2 shape, 4096 tokens)"
    "$OBCACHE" synth --shape smollm2 --length 4096 --rows 128 --decode 16 --seed 1 -o "$TRACE"
  fi
fi

# Wall time, CPU time (user + system) and peak RSS of a child process, from
# getrusage(RUSAGE_CHILDREN).
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

# The trace's shape: query heads over all layers, prompt, positions, head
# dimension, captured decode rows (what the oracles use).
read -r HEADS S NPOS D DECODE < <(python3 - "$TRACE" <<'PYEOF'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
a = f.attrs
rows = f["row_positions"][()]
s = int(a["n_prompt"])
print(int(a["n_layers"]) * int(a["n_heads"]), s, int(a["n_positions"]), int(a["head_dim"]),
      int((rows >= s).sum()))
PYEOF
)
echo "bench: $TRACE: $HEADS query heads, s = $S, $NPOS positions, d = $D, $DECODE decode rows;" \
  "$THREADS thread(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"

declare -A T_C CPU_C T_NP CPU_NP FLOPS SG_GFLOPS SG_CPU_GFLOPS FLOOR_S FLOOR_CPU
for case in one all; do
  if [ $case = one ]; then windows=$MAIN_WINDOW; else windows=$WINDOWS; fi
  max_w=$(tr ',' '\n' <<< "$windows" | sort -n | tail -1)
  read -r t cpu rss < <(measure "$OBCACHE" analyze "$TRACE" -o "$WORK/analysis-$case" \
    --window "$windows" --recent 8 --oracle 1 --scores-out "$WORK/scores-$case.h5" \
    --threads "$THREADS" --quiet)
  T_C[$case]=$t CPU_C[$case]=$cpu
  echo "  obcache analyze --window $windows: $t s wall, $cpu s CPU, peak RSS $rss MiB"
  read -r t cpu rss < <(measure python3 bench/analyze_numpy.py "$TRACE" --window "$windows" \
    --dtype float32 --out "$WORK/numpy-$case.npz")
  T_NP[$case]=$t CPU_NP[$case]=$cpu
  echo "  numpy (float32) --window $windows: $t s wall, $cpu s CPU, peak RSS $rss MiB"
  line=$("$FLOOR" "$TRACE" "$HEADS" "$S" "$NPOS" "$D" "$max_w" "$DECODE" 3)
  FLOPS[$case]=$(sed 's/^flops=\([^ ]*\).*/\1/' <<< "$line")
  SG_GFLOPS[$case]=$(sed 's/.*sgemm_gflops=\([^ ]*\).*/\1/' <<< "$line")
  SG_CPU_GFLOPS[$case]=$(sed 's/.*sgemm_cpu_gflops=\([^ ]*\).*/\1/' <<< "$line")
  FLOOR_S[$case]=$(sed 's/.*floor_s=\([^ ]*\).*/\1/' <<< "$line")
  FLOOR_CPU[$case]=$(sed 's/.*floor_cpu_s=\([^ ]*\).*/\1/' <<< "$line")
  echo "  floor (rows <= $max_w): $line"
done

python3 - "$WORK/numpy-one.npz" "$WORK/scores-one.h5" <<'PYEOF'
import sys, h5py, numpy as np
ref = np.load(sys.argv[1])
worst, p99 = {}, {}
with h5py.File(sys.argv[2], "r") as f:
    for name in ["attn", "attn2", "attn_vl1", "obc_v", "obc_k", "obc_vk",
                 "exact_v", "exact_k", "exact_vk", "remove"]:
        a, b = f[name][()], ref[name]
        # Error relative to each head's largest value: float32 NumPy loses
        # digits in VmO_2norm's cancellation, so entry-wise ratios of tiny
        # values are not meaningful.
        scale = np.abs(b).max(axis=-1, keepdims=True)
        err = np.abs(a - b) / np.maximum(scale, 1e-300)
        worst[name], p99[name] = float(err.max()), float(np.percentile(err, 99))
print("agreement (W = 64, |obcache - numpy| / head max, max): " +
      ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
# exact_k, exact_vk and remove divide by 1 - A: where one key takes nearly all
# of a row's attention NumPy reads 1 - A from the stored lse and O, which is
# the error obcache avoids by recomputing that pair (docs/SCIENCE.md, "A key
# that takes nearly all the attention"); there the two differ by design, so
# those three are checked at the 99th percentile of positions.
exact = ["exact_k", "exact_vk", "remove"]
print("  (99th percentile: " + ", ".join(f"{k} {p99[k]:.1e}" for k in exact) + ")")
bad = {k: v for k, v in worst.items() if k not in exact and not v < 1e-2}
bad.update({k: p99[k] for k in exact if not p99[k] < 1e-2})
if bad:
    sys.exit(f"bench: obcache and NumPy disagree: {bad}")
PYEOF

python3 - <<PYEOF
rows = [("one window (W = $MAIN_WINDOW)", "one", 10), ("8 windows ($WINDOWS)", "all", 25)]
t_c = {"one": ${T_C[one]}, "all": ${T_C[all]}}
cpu_c = {"one": ${CPU_C[one]}, "all": ${CPU_C[all]}}
t_np = {"one": ${T_NP[one]}, "all": ${T_NP[all]}}
cpu_np = {"one": ${CPU_NP[one]}, "all": ${CPU_NP[all]}}
flops = {"one": ${FLOPS[one]}, "all": ${FLOPS[all]}}
sg = {"one": ${SG_GFLOPS[one]}, "all": ${SG_GFLOPS[all]}}
sg_cpu = {"one": ${SG_CPU_GFLOPS[one]}, "all": ${SG_CPU_GFLOPS[all]}}
floor = {"one": ${FLOOR_S[one]}, "all": ${FLOOR_S[all]}}
floor_cpu = {"one": ${FLOOR_CPU[one]}, "all": ${FLOOR_CPU[all]}}
print("| analyze, $THREADS thread(s) | obcache s (wall / CPU) | NumPy s (wall / CPU) | speed-up "
      "(wall / CPU) | target | GFLOP needed | achieved GFLOP/s (wall / CPU) | sgemm GFLOP/s "
      "(wall / CPU) | floor s (wall / CPU) | time / floor (wall / CPU) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name, k, target in rows:
    print(f"| {name} | {t_c[k]:.2f} / {cpu_c[k]:.2f} | {t_np[k]:.2f} / {cpu_np[k]:.2f} | "
          f"{t_np[k] / t_c[k]:.1f}x / {cpu_np[k] / cpu_c[k]:.1f}x | >= {target}x | "
          f"{flops[k] * 1e-9:.1f} | {flops[k] / t_c[k] * 1e-9:.1f} / {flops[k] / cpu_c[k] * 1e-9:.1f} | "
          f"{sg[k]:.1f} / {sg_cpu[k]:.1f} | {floor[k]:.3f} / {floor_cpu[k]:.3f} | "
          f"{t_c[k] / floor[k]:.1f}x / {cpu_c[k] / floor_cpu[k]:.1f}x (target <= 2x) |")
PYEOF

if [ -s "$LLAMA_TRACE" ]; then
  echo "bench: obcache analyze on $LLAMA_TRACE (Llama-3.1-8B shape)"
  read -r t_l cpu_l rss_l < <(measure "$OBCACHE" analyze "$LLAMA_TRACE" -o "$WORK/llama8b-analysis" \
    --threads "$THREADS" --quiet)
  echo "  obcache analyze: $t_l s wall, $cpu_l s CPU, peak RSS $rss_l MiB (target < 2048 MiB)"
else
  echo "bench: $LLAMA_TRACE not found; peak RSS on the Llama-8B shape not measured"
fi
