#!/usr/bin/env bash
# Qwen3 end to end on random-weight checkpoints this test writes: a small
# Qwen3 GGUF whose head_dim (64) is not dim / heads (128 / 4)
# (tests/make_random_gguf.py qwen3-small, Q8_0, SmolLM2's tokenizer) and the
# same model as a Hugging Face folder with tokenizer.json (tests/gguf_to_hf.py).
# On each: model-info reports the qwen3 configuration, generate runs, a
# capture passes `obcache verify`, analyses, replays with the model, and its
# captured Q and K equal the independent reference's q and k after the Q/K
# norms and RoPE (tests/compare_capture_qk.py). Then one layer of Qwen3-8B's
# shape agrees with the reference in both weight modes
# (test_model_reference.py --qwen3-8b; skipped below 12 GB of free memory or
# 4 GB of free disk, and in the sanitizer stage, which leaves numbers to the
# Release build as it leaves out the Python references).
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}" "${OBC_TMP:?}" "${OBC_SOURCE_DIR:?}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
if [ ! -r "$OBC_MODEL" ]; then
  echo "SKIP: no model at $OBC_MODEL (its tokenizer is copied; run scripts/setup.sh)"
  exit 0
fi
scratch qwen3
tests=$OBC_SOURCE_DIR/tests

python3 "$tests/make_random_gguf.py" qwen3-small Q8_0 "$OBC_MODEL" "$dir/qwen3.gguf" ||
  fatal "make_random_gguf.py qwen3-small"
python3 "$tests/gguf_to_hf.py" "$dir/qwen3.gguf" "$dir/qwen3_hf" --tokenizer > /dev/null ||
  fatal "gguf_to_hf.py --tokenizer"

for model in "$dir/qwen3.gguf" "$dir/qwen3_hf"; do
  kind=GGUF
  [ -d "$model" ] && kind=HF
  "$OBCACHE" model-info --model "$model" > "$dir/info.txt" 2>&1
  check "$kind: model-info succeeds" test $? -eq 0
  check "$kind: model-info reports the qwen3 configuration" grep -q \
    "^config: qwen3, 2 layers, dim 128, ffn 256, heads 4 (kv 2), head_dim 64, vocab 49152" \
    "$dir/info.txt"
  check "$kind: model-info reports the Q/K norms, halves, no biases" grep -q \
    "on halves, rope scaling none, tied embeddings yes, qkv bias no, q/k norm yes" "$dir/info.txt"
  "$OBCACHE" generate --model "$model" --prompt "The capital of France is" --max-new-tokens 4 \
    > "$dir/gen.txt" 2> "$dir/gen_err.txt"
  check "$kind: generate succeeds" test $? -eq 0
  grep -q "generated 4 tokens" "$dir/gen_err.txt" || fail "$kind: generate: $(cat "$dir/gen_err.txt")"
  "$OBCACHE" capture --model "$model" --length 200 --depth 50 --haystack noise --decode 4 \
    --rows 48 -o "$dir/t.h5" > "$dir/cap.txt" 2>&1
  check "$kind: capture succeeds" test $? -eq 0 -a -s "$dir/t.h5"
  "$OBCACHE" verify "$dir/t.h5" > "$dir/verify.txt" 2>&1
  check "$kind: obcache verify passes on the trace" test $? -eq 0
  "$OBCACHE" analyze "$dir/t.h5" -o "$dir/analysis" --quiet > "$dir/analyze.txt" 2>&1
  check "$kind: obcache analyze runs on the trace" test $? -eq 0 -a -s "$dir/analysis/recall.csv"
  "$OBCACHE" replay "$dir/t.h5" --model "$model" --budget 10% --protocol aware -o "$dir/replay" \
    > "$dir/replay.txt" 2>&1
  check "$kind: model replay runs on the trace" test $? -eq 0 -a -s "$dir/replay/replay.json"
  python3 "$tests/compare_capture_qk.py" "$dir/t.h5" "$model" "$kind capture" ||
    fail "$kind: captured Q/K differ from the reference"
  rm -rf "$dir/t.h5" "$dir/analysis" "$dir/replay"
done

free_mb=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
disk_mb=$(df -Pm "$dir" | awk 'NR == 2 { print $4 }')
if ldd "$OBCACHE" 2> /dev/null | grep -q libasan; then
  echo "SKIP (Qwen3-8B shape): $OBCACHE is built with AddressSanitizer"
elif [ "${free_mb:-0}" -lt 12000 ] || [ "${disk_mb:-0}" -lt 4000 ]; then
  echo "SKIP (Qwen3-8B shape): $free_mb MB of memory and $disk_mb MB of disk free, need 12000 and 4000"
else
  OBC_TMP=$dir python3 "$tests/test_model_reference.py" --qwen3-8b ||
    fail "Qwen3-8B shape, one layer: logits differ from the reference"
fi
finish
