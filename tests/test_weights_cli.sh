#!/usr/bin/env bash
# CLI test of --weights on the default model: the perplexity of the opening of
# Genesis (KJV) with the matrices in their stored type (native, the default)
# is within 0.5 % of the fp32 reference path (--weights f32); generate and
# model-info say which path they ran; a bad --weights value is one line on
# stderr and a non-zero exit.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}" "${OBC_TMP:?}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
if [ ! -r "$OBC_MODEL" ]; then
  fatal "no model at $OBC_MODEL (run scripts/setup.sh)"
fi
scratch weights_cli

# The passage tests/test_generate.sh scores: Genesis 1:1-16 from bible-kjv,
# else its first five verses.
if command -v bible > /dev/null 2>&1; then
  bible -f Ge1:1-Ge1:16 | sed -E 's/^[0-9]*[A-Za-z]+[0-9]+:[0-9]+ //' > "$dir/genesis.txt"
else
  cat > "$dir/genesis.txt" <<'TEXT'
In the beginning God created the heaven and the earth.
And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.
And God said, Let there be light: and there was light.
And God saw the light, that it was good: and God divided the light from the darkness.
And God called the light Day, and the darkness he called Night. And the evening and the morning were the first day.
TEXT
fi
for w in native f32; do
  "$OBCACHE" perplexity --model "$OBC_MODEL" --weights "$w" "$dir/genesis.txt" --context 256 \
    --stride 128 > "$dir/ppl_$w.txt" 2> "$dir/ppl_err_$w.txt"
  check "perplexity --weights $w succeeds" test $? -eq 0
  echo "     $w: $(cat "$dir/ppl_$w.txt")"
  check "perplexity --weights $w names the path on stderr" grep -q "^weights: $w (" "$dir/ppl_err_$w.txt"
done
native=$(sed -nE 's/^perplexity ([0-9.]+) .*/\1/p' "$dir/ppl_native.txt")
f32=$(sed -nE 's/^perplexity ([0-9.]+) .*/\1/p' "$dir/ppl_f32.txt")
check "native perplexity within 0.5 % of f32 ($native vs $f32)" \
  awk -v a="${native:-0}" -v b="${f32:-1}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.005 * b) }'

"$OBCACHE" model-info --model "$OBC_MODEL" > "$dir/info.txt" 2>&1
check "model-info shows the stored types held" grep -q "^matrices held: native (Q[0-9]_[0-9K] x [0-9]*, Q4_1" "$dir/info.txt"
"$OBCACHE" model-info --model "$OBC_MODEL" --weights f32 > "$dir/info_f32.txt" 2>&1
check "model-info --weights f32 holds F32" grep -q "^matrices held: f32 (F32" "$dir/info_f32.txt"

"$OBCACHE" generate --model "$OBC_MODEL" --weights int4 --prompt hi > /dev/null 2> "$dir/bad.txt"
status=$?
check "--weights int4: non-zero exit" test $status -ne 0
check "--weights int4: one line on stderr" test "$(wc -l < "$dir/bad.txt")" -eq 1
check "--weights int4: names the choices" grep -q "expected native or f32" "$dir/bad.txt"
sed 's/^/     /' "$dir/bad.txt"

finish
