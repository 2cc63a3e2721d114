#!/usr/bin/env bash
# CLI tests of `obcache plot`: every figure of an analysis folder and of a
# sweep folder comes out as a non-empty PNG (checked by its 8-byte signature)
# and SVG; a missing gnuplot, a folder without report.json, a broken report,
# an unknown figure and a failing script each give one clear line, a non-zero
# exit and no image. Fixtures come from tests/plots_fixture.py; the last case
# renders the real analyser's output of a synthetic trace.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?path to the obcache binary}" "${OBC_SOURCE_DIR:?source tree}"
scratch test_plots

ANALYSIS_FIGURES="recall_k recall_window recall_oracles needle_k bias_share bias_score bias_windows taylor recall_layers"
SWEEP_FIGURES="sweep_needle sweep_recall"

# no_images DIR: nothing that looks like an image or a temporary file.
no_images() {
  [ ! -d "$1" ] && return 0
  [ -z "$(find "$1" \( -name '*.png' -o -name '*.svg' -o -name '*.tmp.*' \) -print -quit)" ]
}

python3 "$OBC_SOURCE_DIR/tests/plots_fixture.py" analysis "$dir/analysis" || fail "fixture"
python3 "$OBC_SOURCE_DIR/tests/plots_fixture.py" sweep "$dir/sweep" || fail "sweep fixture"

# 1. Every analysis figure, PNG and SVG, and the printed list names them.
if "$OBCACHE" plot "$dir/analysis" > "$dir/list.txt" 2> "$dir/err.txt"; then
  for f in $ANALYSIS_FIGURES; do
    is_png "$dir/analysis/plots/$f.png" || fail "analysis: $f.png missing, not a PNG or too small"
    is_svg "$dir/analysis/plots/$f.svg" || fail "analysis: $f.svg missing or not an SVG"
    grep -qx "$dir/analysis/plots/$f.png" "$dir/list.txt" || fail "analysis: $f.png not listed"
  done
  [ "$(wc -l < "$dir/list.txt")" -eq 18 ] || fail "analysis: expected 18 files listed, got $(wc -l < "$dir/list.txt")"
  no_temp=$(find "$dir/analysis/plots" -name '*.tmp.*' -o -name '.*gnuplot-log*' | wc -l)
  [ "$no_temp" -eq 0 ] || fail "analysis: temporary files left behind"
  pass "analysis folder: 8 figures x (png, svg)"
else
  fail "analysis: obcache plot failed: $(cat "$dir/err.txt")"
fi

# 2. A sweep folder: both heat maps and the derived per-cell tables.
if "$OBCACHE" plot "$dir/sweep" -o "$dir/sweep_out" > "$dir/list.txt" 2> "$dir/err.txt"; then
  for f in $SWEEP_FIGURES; do
    is_png "$dir/sweep_out/$f.png" || fail "sweep: $f.png missing, not a PNG or too small"
    is_svg "$dir/sweep_out/$f.svg" || fail "sweep: $f.svg missing or not an SVG"
  done
  # 4 lengths x 5 depths, two needles per cell averaged into one row each.
  rows=$(($(wc -l < "$dir/sweep_out/sweep_needle.csv") - 1))
  [ "$rows" -eq 20 ] || fail "sweep: sweep_needle.csv has $rows cells, expected 20"
  pass "sweep folder: 2 figures x (png, svg), 20 cells"
else
  fail "sweep: obcache plot failed: $(cat "$dir/err.txt")"
fi

# 2b. Several gnuplot processes at once draw the same files as one at a time:
#     byte for byte, listed in the same order.
if "$OBCACHE" plot "$dir/analysis" -o "$dir/serial" --jobs 1 > "$dir/serial.txt" 2> "$dir/err.txt" &&
   "$OBCACHE" plot "$dir/analysis" -o "$dir/parallel" --jobs 4 > "$dir/parallel.txt" 2>> "$dir/err.txt"; then
  [ "$(sed "s|$dir/serial/||" "$dir/serial.txt")" = "$(sed "s|$dir/parallel/||" "$dir/parallel.txt")" ] ||
    fail "--jobs 4: listed $(tr '\n' ' ' < "$dir/parallel.txt"), --jobs 1 $(tr '\n' ' ' < "$dir/serial.txt")"
  [ "$(ls -A "$dir/serial")" = "$(ls -A "$dir/parallel")" ] || fail "--jobs 4 and --jobs 1 wrote different files"
  for f in "$dir"/serial/*; do
    cmp -s "$f" "$dir/parallel/${f##*/}" || fail "--jobs 4: ${f##*/} differs from the --jobs 1 one"
  done
  pass "--jobs 4 and --jobs 1: the same $(ls "$dir/serial" | wc -l) files, byte for byte"
else
  fail "--jobs: obcache plot failed: $(cat "$dir/err.txt")"
fi

# 3. --only and --format select figures and formats.
if "$OBCACHE" plot "$dir/analysis" -o "$dir/only" --only taylor,recall_layers --format png \
    --window 8 --k 20 > "$dir/list.txt" 2> "$dir/err.txt"; then
  [ "$(ls "$dir/only" | sort | tr '\n' ' ')" = "recall_layers.png taylor.png " ] ||
    fail "--only/--format: wrote $(ls "$dir/only" | tr '\n' ' ')"
  pass "--only taylor,recall_layers --format png writes exactly those"
else
  fail "--only: $(cat "$dir/err.txt")"
fi

# 3b. A data file with a header and no rows (taylor.csv with --taylor-points 0)
#     or none at all (no needle span: no needle.csv): those figures are
#     skipped with a note, the others are drawn.
cp -r "$dir/analysis" "$dir/notaylor"
rm -rf "$dir/notaylor/plots" "$dir/notaylor/needle.csv" "$dir/notaylor/bias.csv" \
  "$dir/notaylor/recall_layers.csv"
head -1 "$dir/analysis/taylor.csv" > "$dir/notaylor/taylor.csv"
"$OBCACHE" plot "$dir/notaylor" --format png > "$dir/list.txt" 2> "$dir/err.txt"
rc=$?
if [ $rc -eq 0 ] && grep -q "skipped taylor (.*taylor.csv is missing or has no rows)" "$dir/err.txt" &&
   grep -q "skipped needle_k (.*needle.csv is missing" "$dir/err.txt" &&
   [ "$(ls "$dir/notaylor/plots" | tr '\n' ' ')" = "recall_k.png recall_oracles.png recall_window.png " ] &&
   is_png "$dir/notaylor/plots/recall_k.png"; then
  pass "empty taylor.csv, no needle/bias/layer files: $(wc -l < "$dir/err.txt") figures skipped with a note"
else
  fail "empty taylor.csv: exit $rc, stderr '$(cat "$dir/err.txt")'"
fi

# 4. Without gnuplot on PATH: the one-line message, non-zero, no output folder or image.
PATH_NO_GNUPLOT="$dir/empty-bin"
mkdir -p "$PATH_NO_GNUPLOT"
PATH="$PATH_NO_GNUPLOT" "$OBCACHE" plot "$dir/analysis" -o "$dir/nognuplot" > /dev/null 2> "$dir/err.txt"
rc=$?
expected="obcache plot: gnuplot not found on PATH; install gnuplot-nox (apt-get install gnuplot-nox)"
if [ $rc -ne 0 ] && [ "$(cat "$dir/err.txt")" = "$expected" ] && no_images "$dir/nognuplot"; then
  pass "no gnuplot: '$expected', exit $rc, nothing written"
else
  fail "no gnuplot: exit $rc, stderr '$(cat "$dir/err.txt")'"
fi

# expect_error NAME PATTERN -- COMMAND...: non-zero exit, one stderr line matching PATTERN.
expect_error() {
  local name="$1" pattern="$2"
  shift 3
  "$@" > /dev/null 2> "$dir/err.txt"
  local rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l < "$dir/err.txt")" -eq 1 ] && grep -q -- "$pattern" "$dir/err.txt"; then
    pass "$name: $(cat "$dir/err.txt")"
  else
    fail "$name: exit $rc, stderr '$(cat "$dir/err.txt")'"
  fi
}

# 5. Bad input.
mkdir -p "$dir/empty"
expect_error "folder without report.json" "empty/report.json: not found" -- \
  "$OBCACHE" plot "$dir/empty"
no_images "$dir/empty" || fail "folder without report.json: images written"
cp -r "$dir/analysis" "$dir/broken"
rm -rf "$dir/broken/plots"
echo '{"schema": "obcache-analysis/1", "parameters": ' > "$dir/broken/report.json"
expect_error "truncated report.json" "broken/report.json: not valid JSON" -- \
  "$OBCACHE" plot "$dir/broken"
no_images "$dir/broken" || fail "truncated report.json: images written"
expect_error "unknown figure" "--only: no figure 'nope'" -- \
  "$OBCACHE" plot "$dir/analysis" --only nope -o "$dir/nope"
expect_error "window not analysed" "--window 3: not a window of the analysis" -- \
  "$OBCACHE" plot "$dir/analysis" --window 3 -o "$dir/nope"
expect_error "figure named but its data empty" "taylor.csv: not found or no data rows" -- \
  "$OBCACHE" plot "$dir/notaylor" --only taylor -o "$dir/nope"
no_images "$dir/nope" || fail "bad options: images written"

# 6. A failing gnuplot script: the error names it, no image under its final
#    name and no temporary file is left.
cp -r "$OBC_SOURCE_DIR/plots" "$dir/scripts"
echo 'plot "no-such-file.csv" using 1:2' >> "$dir/scripts/taylor.gp"
OBC_PLOTS_DIR="$dir/scripts" expect_error "failing script" "taylor.gp: gnuplot failed" -- \
  "$OBCACHE" plot "$dir/analysis" --only taylor -o "$dir/failing"
no_images "$dir/failing" || fail "failing script: an image or temporary file was left"

# 6b. The failing script among others drawn at once: the one line names it,
#     no new figure starts after it, and what is left is whole (those that
#     ran beside it) or absent, with no temporary file.
OBC_PLOTS_DIR="$dir/scripts" expect_error "failing script, --jobs 4" "taylor.gp: gnuplot failed" -- \
  "$OBCACHE" plot "$dir/analysis" --jobs 4 -o "$dir/failing4"
[ ! -e "$dir/failing4/taylor.png" ] && [ ! -e "$dir/failing4/taylor.svg" ] ||
  fail "failing script, --jobs 4: an image of the failing figure was left"
left=$(find "$dir/failing4" \( -name '*.tmp.*' -o -name '.*gnuplot-log*' \) 2> /dev/null | wc -l)
[ "$left" -eq 0 ] || fail "failing script, --jobs 4: $left temporary files left"
for f in "$dir"/failing4/*.png "$dir"/failing4/*.svg; do
  [ -e "$f" ] || continue
  cmp -s "$f" "$dir/serial/${f##*/}" || fail "failing script, --jobs 4: ${f##*/} is not whole"
done

# 7. Killed half-way (SIGTERM while gnuplot draws): the images already renamed
#    are whole PNGs, and no temporary image or log is left.
"$OBCACHE" plot "$dir/analysis" -o "$dir/killed" --format png > /dev/null 2>&1 &
pid=$!
sleep 1
kill -TERM $pid 2> /dev/null
wait $pid 2> /dev/null
sleep 0.5
left=$(find "$dir/killed" \( -name '*.tmp.*' -o -name '.*gnuplot-log*' \) 2> /dev/null | wc -l)
[ "$left" -eq 0 ] || fail "killed: $left temporary files left"
for png in "$dir"/killed/*.png; do
  [ -e "$png" ] || continue
  is_png "$png" || fail "killed: $png is not a whole PNG"
done
pass "killed half-way: $(ls "$dir/killed" 2> /dev/null | wc -l) whole images, no temporary file"

# 8. The real analyser's output of a small synthetic trace renders too.
if "$OBCACHE" synth -o "$dir/syn.h5" --layers 3 --length 256 --rows 32 --decode 2 > /dev/null 2>&1 &&
   "$OBCACHE" analyze "$dir/syn.h5" -o "$dir/real" --recent 4 > /dev/null 2>&1; then
  if "$OBCACHE" plot "$dir/real" --format png > /dev/null 2> "$dir/err.txt"; then
    for f in $ANALYSIS_FIGURES; do
      is_png "$dir/real/plots/$f.png" || fail "real analysis: $f.png missing or too small"
    done
    pass "real analyser output: 8 PNGs"
  else
    fail "real analysis: $(cat "$dir/err.txt")"
  fi
else
  echo "note: obcache synth/analyze unavailable; real-output case not run"
fi

finish
