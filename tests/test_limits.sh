#!/usr/bin/env bash
# Resource limits and interruptions from the command line: a text file past
# the cap (/dev/zero) or with a NUL byte, a synthetic trace larger than
# --max-bytes, than the free space or than a size a byte count can hold, a
# file-size limit (ulimit -f) hit while writing, and SIGHUP / SIGQUIT while a
# trace is written. Each gives a non-zero exit, one line that names the file
# and the limit, and no file (temporary or final) left behind.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch limits

# expect_failure NAME FRAGMENT OUTPUT CMD...: non-zero exit, exactly one
# stderr line containing FRAGMENT, and no file OUTPUT* (final or temporary;
# "-" when the command writes none).
expect_failure() {
  local name=$1 fragment=$2 output=$3
  shift 3
  "$@" > "$dir/out" 2> "$dir/err"
  local rc=$?
  local lines left=""
  lines=$(wc -l < "$dir/err")
  [ "$output" = - ] || left=$(compgen -G "$output*")
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -qF -- "$fragment" "$dir/err" && [ -z "$left" ]; then
    pass "$name: exit $rc, $(cat "$dir/err")"
  else
    fail "$name: exit $rc, $lines stderr line(s): $(cat "$dir/err"); left: $left"
  fi
}
ulimit -c 0 # SIGQUIT below would dump core

# ---- text input: capped, and text only ----
expect_failure "tokenize --file /dev/zero stops at the cap" \
  "/dev/zero: more than 67108864 bytes, the cap on a text file (raise it with --max-text-bytes N)" - \
  "$OBCACHE" tokenize --file /dev/zero
printf 'hello world\n' > "$dir/hello.txt"
expect_failure "--max-text-bytes lowers the cap" "hello.txt: more than 5 bytes" - \
  "$OBCACHE" tokenize --max-text-bytes 5 --file "$dir/hello.txt"
if "$OBCACHE" tokenize --max-text-bytes 12 --file "$dir/hello.txt" > "$dir/ids"; then
  pass "a file of exactly the cap is read: $(cat "$dir/ids")"
else
  fail "a file of exactly --max-text-bytes is refused"
fi
printf 'a\0b' > "$dir/nul.txt"
expect_failure "a NUL byte is refused with its offset" "nul.txt: NUL byte at offset 1" - \
  "$OBCACHE" tokenize --file "$dir/nul.txt"
expect_failure "generate --prompt-file /dev/zero stops at the cap" "/dev/zero: more than" - \
  "$OBCACHE" generate --prompt-file /dev/zero
expect_failure "perplexity /dev/zero stops at the cap" "/dev/zero: more than" - \
  "$OBCACHE" perplexity /dev/zero

mkdir -p "$dir/hf_zero" && ln -s /dev/zero "$dir/hf_zero/tokenizer.json"
expect_failure "a tokenizer.json that never ends is refused" "hf_zero/tokenizer.json: invalid JSON near byte 0" - \
  "$OBCACHE" tokenize --model "$dir/hf_zero" hello

# ---- synth: the size is known before writing ----
expect_failure "synth --layers 1e9 is refused before writing" \
  "$dir/big.h5: the trace would take 27968000000000 bytes, more than --max-bytes 17179869184" "$dir/big.h5" \
  "$OBCACHE" synth --layers 1000000000 -o "$dir/big.h5"
expect_failure "synth beyond the free space is refused" "$dir/big.h5: disk full: the trace needs" "$dir/big.h5" \
  "$OBCACHE" synth --layers 1000000000 --max-bytes 100000000000000000 -o "$dir/big.h5"
expect_failure "synth --max-bytes below the trace is refused" "more than --max-bytes 1000" "$dir/small.h5" \
  "$OBCACHE" synth --max-bytes 1000 -o "$dir/small.h5"
expect_failure "synth with a byte count past 2^64 is refused" \
  "$dir/huge.h5: shape too large (its byte count overflows)" "$dir/huge.h5" \
  "$OBCACHE" synth --heads 4000000000000000000 --kv-heads 2 -o "$dir/huge.h5"
(
  trap '' XFSZ
  ulimit -f 64
  expect_failure "synth beyond ulimit -f is refused before writing" \
    "$dir/limited.h5: the trace needs about 0.5 MiB, beyond the file-size limit of 0.1 MiB (ulimit -f)" "$dir/limited.h5" \
    "$OBCACHE" synth --layers 20 -o "$dir/limited.h5"
  exit "$failures"
) || failures=$((failures + 1))

# ---- a file-size limit hit mid-write is told from a full disk ----
"$OBCACHE" synth --layers 2 --length 2048 --rows 64 -o "$dir/t.h5" > /dev/null
(
  trap '' XFSZ
  ulimit -f 64
  expect_failure "a CSV cut by ulimit -f says so" \
    "write failed: file size limit exceeded (ulimit -f)" "$dir/analysis" \
    "$OBCACHE" analyze "$dir/t.h5" -o "$dir/analysis" --quiet
  exit "$failures"
) || failures=$((failures + 1))
(
  trap '' XFSZ
  ulimit -f 300 # the CSVs fit, the scores file does not
  expect_failure "an HDF5 file cut by ulimit -f says so" \
    "scores.h5: cannot close HDF5 file: file size limit exceeded (ulimit -f)" "$dir/scores.h5" \
    "$OBCACHE" analyze "$dir/t.h5" -o "$dir/analysis" --quiet --scores-out "$dir/scores.h5"
  exit "$failures"
) || failures=$((failures + 1))

# ---- SIGHUP and SIGQUIT remove the temporary file ----
# A trace slow to compute (about 1 s a layer on one thread) but quick to
# stop: the signal comes as soon as its temporary file exists.
SLOW=(--threads 1 --layers 8 --heads 16 --kv-heads 1 --head-dim 256 --length 4096 --rows 1024
  --decode 0)
interrupt() { # interrupt SIGNAL: synth, the signal once the temporary file exists
  local sig=$1 out="$dir/$1.h5" pid rc seen=no left
  "$OBCACHE" synth "${SLOW[@]}" -o "$out" > /dev/null 2> "$dir/err" &
  pid=$!
  # No deadline of its own, however slow the machine: the wait ends when the
  # file appears or synth exits (CTest's TIMEOUT catches a hang).
  while kill -0 "$pid" 2> /dev/null; do
    compgen -G "$out.tmp.*" > /dev/null && seen=yes && break
    sleep 0.05
  done
  kill "-$sig" "$pid"
  wait "$pid"
  rc=$?
  left=$(compgen -G "$out*")
  local want=$((128 + $(kill -l "$sig")))
  if [ "$seen" = yes ] && [ "$rc" -eq "$want" ] && [ -z "$left" ]; then
    pass "SIG$sig mid-write: exit $rc, no file left"
  else
    fail "SIG$sig mid-write: temporary file seen: $seen, exit $rc (expected $want), left: $left"
  fi
}
interrupt HUP
# A non-interactive shell starts background jobs with QUIT ignored (and the
# handler leaves an ignored signal ignored); with job control it does not.
set -m
interrupt QUIT
set +m

finish
