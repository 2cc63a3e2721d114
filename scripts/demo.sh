#!/usr/bin/env bash
# The demo behind `make demo` (called as scripts/demo.sh build/obcache). For
# now it is synthetic: it writes a SmolLM2-shaped trace (30 layers, 9 query
# heads, 3 KV heads, d=64; a 4096-token prompt with a planted needle, the last
# 128 prompt rows and 16 decode steps captured) and analyses it with the
# paper's settings: top-40 budget (and a recall@k curve), a window sweep
# 1, 2, 4, ..., 128 with main window 64, with and without a recent window of 8
# tokens, recall measured against the first decode step's true eviction error
# (oracle@1). Everything lands in ./demo-out/.
set -euo pipefail
OBCACHE=${1:-build/obcache}
OUT=${DEMO_OUT:-demo-out}
mkdir -p "$OUT"

TRACE=$OUT/smollm2-synth.h5
echo "demo: 1/2 synthesising a SmolLM2-shaped trace: $TRACE"
"$OBCACHE" synth --shape smollm2 --prompt 4096 --rows 128 --decode 16 --seed 1 -o "$TRACE"

echo "demo: 2/2 analysing it (top-40, windows 1..128, recent 0 and 8, oracle@1)"
"$OBCACHE" analyze "$TRACE" -o "$OUT/analysis" --recent 8 --oracle 1 \
  --scores-out "$OUT/analysis-scores.h5"
echo
echo "demo: files in $OUT/analysis/: report.json (parameters, summary), recall.csv,"
echo "      recall_layers.csv, recall_heads.csv, spearman.csv, needle.csv, bias.csv,"
echo "      taylor.csv; per-token scores at W=64 in $OUT/analysis-scores.h5"
if "$OBCACHE" --help | grep -q '^  plot '; then
  "$OBCACHE" plot "$OUT/analysis" >/dev/null
  echo "demo: figures in $OUT/analysis/plots/"
fi
