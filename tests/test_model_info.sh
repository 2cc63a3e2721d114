#!/usr/bin/env bash
# CLI test of `obcache model-info`: on the default SmolLM2 GGUF it reports the
# tensor table as stored (Q4_1, Q8_0 and F32) and the configuration model_load
# derives; a missing or damaged model is a one-line error and exit status 1.
set -euo pipefail
: "${OBCACHE:?}" "${OBC_TMP:?}"
work="$OBC_TMP/model_info.$$"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

if [ -n "${OBC_MODEL:-}" ] && [ -r "$OBC_MODEL" ]; then
  out=$("$OBCACHE" model-info --model "$OBC_MODEL")
  echo "$out"
  grep -q "^format: GGUF v3" <<<"$out"
  grep -q "^tensors: 272 (F32 61, Q4_1 210, Q8_0 1)" <<<"$out"
  grep -q "^config: llama, 30 layers, dim 576, ffn 1536, heads 9 (kv 3), head_dim 64, vocab 49152" <<<"$out"
  grep -q "tied embeddings yes" <<<"$out"
  listed=$("$OBCACHE" model-info --model "$OBC_MODEL" --tensors --no-load | grep -c "^  blk\.")
  [ "$listed" = 270 ] || { echo "expected 270 blk tensors, listed $listed"; exit 1; }
else
  echo "SKIP (real model): OBC_MODEL missing; run scripts/setup.sh"
fi

expect_error() { # expect_error FRAGMENT ARGS...: exit 1, one line on stderr naming FRAGMENT
  local fragment=$1; shift
  set +e
  "$OBCACHE" model-info "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  set -e
  [ "$rc" = 1 ] || { echo "model-info $*: exit $rc, expected 1"; exit 1; }
  [ "$(wc -l <"$work/err")" = 1 ] || { echo "model-info $*: not one line:"; cat "$work/err"; exit 1; }
  grep -qF -- "$fragment" "$work/err" || { echo "model-info $*: no '$fragment' in:"; cat "$work/err"; exit 1; }
  echo "ok: $(cat "$work/err")"
}
expect_error "$work/none.gguf" --model "$work/none.gguf"
printf 'GGUF\003\000\000\000' >"$work/short.gguf"
expect_error "truncated at offset 8" --model "$work/short.gguf"
printf 'not a model at all' >"$work/text.gguf"
expect_error "not a GGUF file" --model "$work/text.gguf"
mkdir -p "$work/folder"
echo '{"model_type": "mistral"}' >"$work/folder/config.json"
printf '\010\000\000\000\000\000\000\000{}      ' >"$work/folder/model.safetensors"
expect_error "config.json: model_type" --model "$work/folder"
expect_error "unknown option '--bogus' (try obcache model-info --help)" --bogus
echo "model-info CLI: all checks passed"
