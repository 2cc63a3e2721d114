#!/usr/bin/env bash
# CLI tests of `obcache plot` on an eval folder (accuracy.csv, paired.csv,
# recall.csv of `obcache eval`, written here by tests/eval_plots_fixture.py):
# the four eval figures come out as PNG and SVG, with the forest plot's table
# and index.html beside them; a damaged CSV (ragged row, a count or share out
# of range, an interval that misses its value, a name that is not one,
# counts that disagree, a missing column, binary garbage) fails with one line
# naming the file and its line, a non-zero exit and nothing written. The
# figure checks are skipped when gnuplot is absent; the damaged-file checks
# run first in any case, as the files are read before gnuplot is looked for.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?path to the obcache binary}" "${OBC_SOURCE_DIR:?source tree}"
scratch test_eval_plots

EVAL_FIGURES="eval_accuracy eval_heatmap eval_paired eval_recall"

python3 "$OBC_SOURCE_DIR/tests/eval_plots_fixture.py" "$dir/eval" || fatal "fixture"

# damaged NAME FILE LINE SED PATTERN: a copy of the fixture with line LINE
# of FILE changed by the sed expression SED; obcache plot must fail with one
# stderr line matching PATTERN and write nothing.
damaged() {
  local name="$1" file="$2" line="$3" expression="$4" pattern="$5"
  local copy="$dir/damaged-$name"
  rm -rf "$copy"
  cp -r "$dir/eval" "$copy"
  sed -i "${line}${expression}" "$copy/$file"
  cmp -s "$copy/$file" "$dir/eval/$file" && fail "$name: the sed expression changed nothing"
  "$OBCACHE" plot "$copy" > /dev/null 2> "$dir/err.txt"
  local rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l < "$dir/err.txt")" -eq 1 ] &&
    grep -q -- "$copy/$file: $pattern" "$dir/err.txt" && [ ! -e "$copy/plots" ]; then
    pass "$name: $(sed "s|$copy/||" "$dir/err.txt")"
  else
    fail "$name: exit $rc, plots/ $([ -e "$copy/plots" ] && echo made || echo absent), stderr '$(cat "$dir/err.txt")'"
  fi
}

# 1. Damaged files. Line 2 of accuracy.csv is the first task's full-cache
#    row, line 3 its oracle@T row at the smallest budget.
damaged "ragged row" accuracy.csv 3 's/,agnostic,/,/' "line 3 has 14 fields (expected 15"
damaged "correct above n" accuracy.csv 3 's/,24,22,/,24,25,/' "line 3, column 'correct': 25 is outside \[0, 24\]"
damaged "share not a number" accuracy.csv 3 's/,0.916666667,0.741511978,/,abc,0.741511978,/' \
  "line 3, column 'accuracy': expected a number, found 'abc'"
damaged "share NaN" accuracy.csv 3 's/,0.916666667,0.741511978,/,nan,0.741511978,/' \
  "line 3, column 'accuracy': nan is outside \[0, 1\]"
damaged "accuracy not correct over n" accuracy.csv 3 's/,24,22,/,24,21,/' "line 3: accuracy 0.916666667 is not correct/n"
damaged "interval misses the share" accuracy.csv 3 's/,0.741511978,0.976841185,/,0.95,0.976841185,/' \
  "line 3: interval \[0.95, 0.976841185\] does not contain accuracy"
damaged "bad budget" accuracy.csv 3 's/,5%,/,five,/' "line 3, column 'budget': 'five' is not a budget"
damaged "budget over 100%" accuracy.csv 3 's/,5%,/,500%,/' "line 3, column 'budget': '500%' is not a budget"
damaged "full cache with a budget" accuracy.csv 2 's/,full,,,/,full,10%,,/' "line 2: the full cache has a budget or protocol"
damaged "unknown protocol" accuracy.csv 3 's/,agnostic,/,psychic,/' "line 3, column 'protocol': 'psychic'"
damaged "quote in a policy name" accuracy.csv 3 "s/,oracle@T,/,x');system('id,/" \
  "line 3, column 'policy': 'x');system('id' is not a name"
damaged "huge count" accuracy.csv 3 's/,24,22,/,1e400,22,/' "line 3, column 'n': 1e400 is outside"
damaged "fractional count" accuracy.csv 3 's/,24,22,/,24,21.5,/' "line 3, column 'correct': 21.5 is not a whole number"
damaged "missing column" accuracy.csv 1 's/,fraction$/,share/' "no column 'fraction'"
damaged "paired p above 1" paired.csv 2 's/,0.25,0.375,/,1.5,0.375,/' "line 2, column 'mcnemar_p': 1.5 is outside \[0, 1\]"
damaged "sign-flip p above 1" paired.csv 2 's/,0.25$/,1.5/' "line 2, column 'sign_flip_p': 1.5 is outside \[0, 1\]"
damaged "score interval misses the score" accuracy.csv 3 's/,0.916666667,0.741511978,0.976841185,,/,0.916666667,0.95,0.976841185,,/' \
  "line 3: interval \[0.95, 0.976841185\] does not contain score"
damaged "paired counts disagree" paired.csv 2 's/,0.125,0,0.291666667,/,0.5,0,0.291666667,/' \
  "line 2: difference 0.5 and the counts disagree"
damaged "paired interval reversed" paired.csv 2 's/,0.125,0,0.291666667,/,0.125,0.3,0.291666667,/' \
  "line 2: interval \[0.3, 0.291666667\] is reversed"
damaged "recall quartile 5" recall.csv 2 's/^all,1,/all,5,/' "line 2, column 'quartile': 5 is outside \[1, 4\]"
damaged "recall AUC differs within a group" recall.csv 3 's/,0.631580741$/,0.7/' \
  "line 3: auc 0.7 differs from the budget's earlier rows"

# Header only, and bytes that are no CSV at all.
cp -r "$dir/eval" "$dir/header-only"
head -1 "$dir/eval/accuracy.csv" > "$dir/header-only/accuracy.csv"
"$OBCACHE" plot "$dir/header-only" > /dev/null 2> "$dir/err.txt"
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l < "$dir/err.txt")" -eq 1 ] &&
  grep -q "header-only/accuracy.csv: no data rows" "$dir/err.txt" && [ ! -e "$dir/header-only/plots" ]; then
  pass "header only: $(cat "$dir/err.txt")"
else
  fail "header only: exit $rc, stderr '$(cat "$dir/err.txt")'"
fi
# Bytes that are no CSV: binary with a NUL first (the text before the first
# NUL is all a C string reader sees), and a NUL inside the header.
for garbage in 'nul-first:\0\001\377,,\n\n' 'nul-inside:budget,quart\0ile\n1,2\n'; do
  name=${garbage%%:*}
  cp -r "$dir/eval" "$dir/$name"
  printf "${garbage#*:}" > "$dir/$name/recall.csv"
  "$OBCACHE" plot "$dir/$name" > /dev/null 2> "$dir/err.txt"
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l < "$dir/err.txt")" -eq 1 ] &&
    grep -q "$name/recall.csv: " "$dir/err.txt" && [ ! -e "$dir/$name/plots" ]; then
    pass "$name recall.csv: $(sed "s|$dir/||" "$dir/err.txt")"
  else
    fail "$name recall.csv: exit $rc, stderr '$(head -c 300 "$dir/err.txt")'"
  fi
done

# 2. The figures, the forest plot's table and index.html.
if ! command -v gnuplot > /dev/null; then
  echo "note: gnuplot not on PATH; the eval figures are not drawn here"
  finish
fi
if "$OBCACHE" plot "$dir/eval" > "$dir/list.txt" 2> "$dir/err.txt"; then
  for f in $EVAL_FIGURES; do
    is_png "$dir/eval/plots/$f.png" || fail "eval: $f.png missing, not a PNG or too small"
    is_svg "$dir/eval/plots/$f.svg" || fail "eval: $f.svg missing or not an SVG"
    grep -qx "$dir/eval/plots/$f.png" "$dir/list.txt" || fail "eval: $f.png not listed"
    grep -q "<img src=\"$f.png\"" "$dir/eval/plots/index.html" || fail "eval: index.html lacks $f.png"
  done
  # 2 pairs x 4 budgets of the pooled "all" rows.
  rows=$(($(wc -l < "$dir/eval/plots/eval_paired.csv") - 1))
  [ "$rows" -eq 8 ] || fail "eval: eval_paired.csv has $rows rows, expected 8"
  # Both tables, every row: 125 accuracy rows and 40 paired rows.
  [ "$(grep -c '^<tr><td>' "$dir/eval/plots/index.html")" -eq 165 ] ||
    fail "eval: index.html has $(grep -c '^<tr><td>' "$dir/eval/plots/index.html") table rows, expected 165"
  [ "$(wc -l < "$dir/list.txt")" -eq 10 ] || fail "eval: expected 10 files listed, got $(wc -l < "$dir/list.txt")"
  [ -z "$(find "$dir/eval/plots" -name '*.tmp.*' -o -name '.*gnuplot-log*')" ] ||
    fail "eval: temporary files left behind"
  pass "eval folder: 4 figures x (png, svg), eval_paired.csv, index.html"
else
  fail "eval: obcache plot failed: $(cat "$dir/err.txt")"
fi

# 3. --only draws one figure; the index shows what is there.
if "$OBCACHE" plot "$dir/eval" -o "$dir/only" --only eval_recall --format png > /dev/null 2> "$dir/err.txt"; then
  [ "$(ls "$dir/only" | tr '\n' ' ')" = "eval_recall.png index.html " ] ||
    fail "--only eval_recall: wrote $(ls "$dir/only" | tr '\n' ' ')"
  grep -q 'eval_accuracy' "$dir/only/index.html" && fail "--only eval_recall: index.html shows a figure not drawn"
  pass "--only eval_recall --format png: the figure and index.html"
else
  fail "--only eval_recall: $(cat "$dir/err.txt")"
fi

# 4. Without paired.csv and recall.csv: those figures are skipped with a note.
cp -r "$dir/eval" "$dir/accuracy-only"
rm -rf "$dir/accuracy-only/plots" "$dir/accuracy-only/paired.csv" "$dir/accuracy-only/recall.csv"
if "$OBCACHE" plot "$dir/accuracy-only" --format svg > /dev/null 2> "$dir/err.txt" &&
  grep -q "skipped eval_paired" "$dir/err.txt" && grep -q "skipped eval_recall" "$dir/err.txt"; then
  [ "$(ls "$dir/accuracy-only/plots" | tr '\n' ' ')" = "eval_accuracy.svg eval_heatmap.svg index.html " ] ||
    fail "accuracy only: wrote $(ls "$dir/accuracy-only/plots" | tr '\n' ' ')"
  pass "accuracy.csv alone: eval_accuracy, eval_heatmap, index.html; the others skipped"
else
  fail "accuracy only: $(cat "$dir/err.txt")"
fi

# 5. Without RULER's score columns: the figures draw the accuracy and the
# forest plot the accuracy difference and McNemar p.
cp -r "$dir/eval" "$dir/no-score"
rm -rf "$dir/no-score/plots"
python3 - "$dir/no-score" <<'PY'
import csv, sys
for name, drop in (("accuracy.csv", {"score_ci_low", "score_ci_high"}),
                   ("paired.csv", {"baseline_score", "paired_score", "score_difference",
                                   "score_ci_low", "score_ci_high", "sign_flip_p"})):
    path = f"{sys.argv[1]}/{name}"
    rows = list(csv.reader(open(path)))
    keep = [i for i, c in enumerate(rows[0]) if c not in drop]
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([[r[i] for i in keep] for r in rows])
PY
if "$OBCACHE" plot "$dir/no-score" --format svg > /dev/null 2> "$dir/err.txt" &&
  grep -q "accuracy against the KV-cache budget" "$dir/no-score/plots/eval_accuracy.svg" &&
  grep -q "McNemar p" "$dir/no-score/plots/eval_paired.svg" &&
  grep -q "RULER score" "$dir/eval/plots/eval_accuracy.svg" &&
  grep -q "sign-flip p" "$dir/eval/plots/eval_paired.svg"; then
  pass "without the score columns: accuracy and McNemar; with them: RULER's score and sign-flip"
else
  fail "no-score folder: $(cat "$dir/err.txt")"
fi

finish
