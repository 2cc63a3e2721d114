#!/usr/bin/env bash
# Stored-type weights at a large model's shape without its download (not a
# test): tests/make_random_gguf.py writes a random-weight Q4_K GGUF of
# Llama-3.1-8B shape (32 layers, dim 4096, ffn 14336, 32/8 heads of 128,
# vocab 128256; ~4.6 GB), then this prints the peak RSS of `obcache generate`
# against file + KV cache + 150 MB, bench_model's decode tokens/s and share of
# the memory roofline, and, when the machine has the ~36 GB the fp32 copy
# needs, the agreement of the logits with --weights f32. Skips with a message
# when the disk has no room. The file is deleted at the end.
#
# usage: bench/run_weights.sh [BUILD_DIR] [SHAPE]   (SHAPE llama-8b (default) or llama-1b)
#   OBC_TMP: where the file goes (default BUILD_DIR/test-tmp)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SHAPE=${2:-llama-8b}
OBCACHE="$BUILD/obcache"
SOURCE_MODEL=${OBC_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
case $SHAPE in
  llama-8b) need_mb=5500 layers=32 kv=8 head_dim=128 k=14336 f32_gb=36 ;;
  llama-1b) need_mb=1500 layers=16 kv=8 head_dim=64 k=8192 f32_gb=7 ;;
  *) echo "run_weights: unknown shape $SHAPE (llama-8b or llama-1b)" >&2; exit 2 ;;
esac
tmp=${OBC_TMP:-$BUILD/test-tmp}
mkdir -p "$tmp"
free_mb=$(df -Pm "$tmp" | awk 'NR == 2 { print $4 }')
if [ "${free_mb:-0}" -lt "$need_mb" ]; then
  echo "skipped: $free_mb MB free under $tmp, the $SHAPE Q4_K file needs $need_mb"
  exit 0
fi
model="$tmp/bench-$SHAPE-Q4_K.gguf"
trap 'rm -f "$model" "$tmp/bench-native.f32" "$tmp/bench-f32.f32"' EXIT
start=$(date +%s)
python3 tests/make_random_gguf.py "$SHAPE" Q4_K "$SOURCE_MODEL" "$model" || exit 1
file_bytes=$(stat -c %s "$model")
echo "$SHAPE Q4_K random weights: $((file_bytes / 1000000)) MB written in $(($(date +%s) - start)) s"

context=256
kv_bytes=$((layers * kv * head_dim * context * 2 * 4))
if [ -x /usr/bin/time ]; then
  /usr/bin/time -f "peak %M" "$OBCACHE" version > /dev/null 2> "$tmp/bench-base.txt"
  base=$(tail -n 1 "$tmp/bench-base.txt" | sed -nE 's/^peak ([0-9]+)$/\1/p')
  if ! /usr/bin/time -f "peak %M" "$OBCACHE" generate --model "$model" --context $context \
    --prompt "The capital of France is a city that" --max-new-tokens 2 > /dev/null 2> "$tmp/bench-gen.txt"; then
    cat "$tmp/bench-gen.txt" >&2
    exit 1
  fi
  grep -E "^(weights|prompt):" "$tmp/bench-gen.txt"
  peak=$(tail -n 1 "$tmp/bench-gen.txt" | sed -nE 's/^peak ([0-9]+)$/\1/p')
  limit=$(((file_bytes + kv_bytes + 150000000) / 1024))
  echo "generate peak RSS $((peak / 1024)) MiB; $(((peak - base) / 1024)) MiB above the binary's" \
    "own $((base / 1024)) MiB; file + KV + 150 MB = $((limit / 1024)) MiB:" \
    "$([ $((peak - base)) -le $limit ] && echo within || echo OVER)"
else
  echo "no /usr/bin/time: peak RSS not measured"
fi

"$BUILD/bench/bench_model" "$model" --weights native --lengths 64 --decode 4

avail_gb=$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)
if [ "${avail_gb:-0}" -lt "$f32_gb" ]; then
  echo "agreement with --weights f32 skipped: $avail_gb GB available, the fp32 copy needs ~$f32_gb"
  exit 0
fi
ids=$(seq -s, 1000 1013)
for w in native f32; do
  "$OBCACHE" logits --model "$model" --weights $w --ids "$ids" --all -o "$tmp/bench-$w.f32" \
    2> /dev/null || exit 1
done
python3 tests/compare_logits.py "$tmp/bench-native.f32" "$tmp/bench-f32.f32" 128256 $k $layers \
  "$SHAPE Q4_K, 14 tokens"
