#!/usr/bin/env bash
# Runs every benchmark of bench/ (not tests: they print figures and ratios
# against a reference measured in the same run) for `make bench`.
#
# usage: bench/run.sh [BUILD_DIR]   (default build; the benchmarks target must be built)
#   ONLY=scores,analyze,model,attention,load,tokenizer,waitpolicy,weights,slurm,quantdot,replay,eval
#   runs a subset
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ONLY=${ONLY:-scores,load,tokenizer,model,attention,analyze,waitpolicy,weights,slurm,quantdot,replay,eval}

want() { case ",$ONLY," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
section() { printf '\n== %s ==\n' "$1"; }

if want scores; then
  section "score_window_sweep, one SmolLM2-shaped head (bench_scores)"
  "$BUILD/bench/bench_scores"
fi
if want load; then
  section "model load and dequantisation (bench_load)"
  "$BUILD/bench/bench_load"
fi
if want tokenizer; then
  section "tokenizer encode speed (bench_tokenizer)"
  "$BUILD/bench/bench_tokenizer"
fi
if want model; then
  section "CPU forward pass: prefill and decode tokens/s, GEMM share (bench_model)"
  "$BUILD/bench/bench_model"
fi
if want attention; then
  section "CPU attention of one layer: online softmax vs two passes (bench_attention)"
  "$BUILD/bench/bench_attention"
fi
if want analyze; then
  section "obcache analyze against the NumPy pseudo-code (run_analyze.sh)"
  bench/run_analyze.sh "$BUILD"
fi
if want waitpolicy; then
  section "decode tokens/s by OpenMP wait policy, next to busy processes (run_wait_policy.sh)"
  bench/run_wait_policy.sh "$BUILD"
fi
if want weights; then
  section "stored-type weights at Llama-3.1-8B shape: peak RSS, decode, f32 agreement (run_weights.sh)"
  bench/run_weights.sh "$BUILD"
fi
if want slurm; then
  section "a 6-cell sweep: one process vs Slurm arrays of 2 and 3 tasks (run_slurm.sh)"
  bench/run_slurm.sh "$BUILD"
fi
if want quantdot; then
  section "quantised dot products: decode GB/s against the read bandwidth (bench_quant_dot)"
  OMP_NUM_THREADS=1 "$BUILD/bench/bench_quant_dot" all 3
fi
if want replay; then
  section "replay --sweep: batched model replay against one set at a time (run_replay.sh)"
  bench/run_replay.sh "$BUILD"
fi
if want eval; then
  section "eval: a sample's time against prefill + one batched decode (run_eval.sh)"
  bench/run_eval.sh "$BUILD"
fi
