#!/usr/bin/env bash
# The figures answer at a glance only when their axes fit the data: for every
# figure of obcache plot, drawn from an analysis folder (of a tiny synthetic
# trace), an eval folder (tests/eval_plots_fixture.py), a replay sweep (a
# one-trace sweep of the default model, tests/data/replay_sweep), a sweep
# folder (tests/plots_fixture.py) and a dynamic folder (a short run of the
# default model, tests/data/dynamic), obcache plot runs under
# OBC_PLOT_RANGES, so that every panel's script writes the ranges gnuplot
# drew, and tests/figure_ranges_check.py compares them with what it reads
# from the data files itself: no axis may cut data off or leave more than a
# third of its length empty, and a heat map's axes span exactly its rows and
# columns, its colours 0..1. The checker itself must fail on ranges that do
# not.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?path to the obcache binary}" "${OBC_SOURCE_DIR:?source tree}"
scratch test_figure_ranges
CHECK="$OBC_SOURCE_DIR/tests/figure_ranges_check.py"

ANALYSIS_FIGURES=recall_k,needle_k,recall_window,recall_oracles,bias_share,bias_score
ANALYSIS_FIGURES=$ANALYSIS_FIGURES,bias_windows,taylor,recall_layers

# plot_ranges NAME FOLDER FIGURES [KIND]: those figures as PNGs under
# $dir/NAME.out, their ranges under $dir/NAME.ranges, then the check of a
# folder of that KIND (default NAME) in $dir/NAME.check.
plot_ranges() {
  mkdir -p "$dir/$1.ranges"
  if ! OBC_PLOT_RANGES="$dir/$1.ranges" "$OBCACHE" plot "$2" -o "$dir/$1.out" --format png \
    --only "$3" > /dev/null 2> "$dir/$1.err"; then
    fail "$1: obcache plot failed: $(head -1 "$dir/$1.err")"
    return
  fi
  if python3 "$CHECK" "$dir/$1.ranges" "${4:-$1}" "$2" "$dir/$1.out" > "$dir/$1.check" 2>&1; then
    pass "$1: $(grep -c '^ok' "$dir/$1.check") figures, every axis fits its data"
  else
    fail "$1: $(grep -v '^ok' "$dir/$1.check" | tr '\n' ' ')"
  fi
}

# 1. A real analysis of a tiny synthetic trace (with a needle span), the
#    recent window 8 above the smallest budgets.
if "$OBCACHE" synth -o "$dir/t.h5" --length 256 --rows 32 > /dev/null 2> "$dir/err" &&
   "$OBCACHE" analyze "$dir/t.h5" -o "$dir/analysis" --window 4,16 --recent 8 --oracle 1 \
     > /dev/null 2>> "$dir/err"; then
  plot_ranges analysis "$dir/analysis" "$ANALYSIS_FIGURES"
else
  fail "synthetic analysis: $(head -1 "$dir/err")"
fi

# 2. An analysis folder shaped like a real model's (tests/plots_fixture.py):
#    six layers, every window, scores that spread over fewer decades.
python3 "$OBC_SOURCE_DIR/tests/plots_fixture.py" analysis "$dir/fixture" > /dev/null ||
  fatal "analysis fixture"
plot_ranges fixture "$dir/fixture" "$ANALYSIS_FIGURES" analysis

# 3. An eval folder: accuracy with intervals, the heat maps, the forest plot,
#    recall quartiles.
python3 "$OBC_SOURCE_DIR/tests/eval_plots_fixture.py" "$dir/eval" > /dev/null || fatal "eval fixture"
plot_ranges eval "$dir/eval" eval_accuracy,eval_heatmap,eval_paired,eval_recall

# 4. A replay sweep: one trace, so shares of 0 or 1 and policies that coincide.
cp -r "$OBC_SOURCE_DIR/tests/data/replay_sweep" "$dir/replay"
plot_ranges replay "$dir/replay" replay_needle,replay_kl,replay_kl_steps

# 5. A sweep folder: the (length, depth) heat maps.
python3 "$OBC_SOURCE_DIR/tests/plots_fixture.py" sweep "$dir/sweep" > /dev/null ||
  fatal "sweep fixture"
plot_ranges sweep "$dir/sweep" sweep_needle,sweep_recall

# 6. A dynamic folder: perplexity along a text, one panel per budget.
cp -r "$OBC_SOURCE_DIR/tests/data/dynamic" "$dir/dynamic"
plot_ranges dynamic "$dir/dynamic" dynamic_ppl

# 7. Every figure obcache plot --help lists was checked above.
figures=$("$OBCACHE" plot --help 2>&1 | sed -n 's/^  \([a-z_0-9]*\)  (.*/\1/p' | sort)
checked=$(cat "$dir"/{analysis,fixture,eval,replay,sweep,dynamic}.check 2> /dev/null |
  sed -n 's/^ok    \([a-z_0-9]*\):.*/\1/p' | sort -u)
missing=$(comm -23 <(echo "$figures") <(echo "$checked") | tr '\n' ' ')
if [ -n "$figures" ] && [ -z "$missing" ]; then
  pass "all $(echo "$figures" | wc -l) figures of obcache plot checked"
else
  fail "figures not checked: ${missing:-obcache plot --help lists none}"
fi

# 8. The check fails on an axis three times too tall and on one that cuts the
#    data off (the right panel of replay_kl: the error from 0).
if [ -f "$dir/replay.ranges/replay_kl.png.ranges" ]; then
  for case in "taller:3:more than a third empty:fill" "shorter:0.5:data cut off:cut off"; do
    IFS=: read -r name factor what pattern <<< "$case"
    mkdir -p "$dir/$name"
    cp "$dir/replay.ranges/"*.ranges "$dir/$name/"
    awk -v f="$factor" '$2 == 2 { $6 = $6 * f } { print }' "$dir/replay.ranges/replay_kl.png.ranges" \
      > "$dir/$name/replay_kl.png.ranges"
    if python3 "$CHECK" "$dir/$name" replay "$dir/replay" "$dir/replay.out" > "$dir/$name.check" 2>&1; then
      fail "check: accepted a y axis $factor times as tall ($what)"
    elif grep -q "^FAIL  replay_kl: panel 2 y: .*$pattern" "$dir/$name.check"; then
      pass "check: refuses a y axis $factor times as tall ($what)"
    else
      fail "check ($name): $(cat "$dir/$name.check" | tr '\n' ' ')"
    fi
  done
fi

# 9. ...and on a heat map with a row too many, one column too few, or colours
#    that are not its 0..1 (recall_layers: layers down the y axis, scores
#    across).
if [ -f "$dir/analysis.ranges/recall_layers.png.ranges" ]; then
  for case in "extra_row|\$5 += 1|y: axis .* for [0-9]* categories|a row too many" \
    "missing_column|\$4 -= 1|x: axis .* for [0-9]* categories|a column too few" \
    "colours|\$8 *= 0.8|colour: axis .* for shares|colours to 0.8"; do
    IFS='|' read -r name edit pattern what <<< "$case"
    mkdir -p "$dir/$name"
    cp "$dir/analysis.ranges/"*.ranges "$dir/$name/"
    awk "\$1 == \"recall_layers\" { $edit } { print }" \
      "$dir/analysis.ranges/recall_layers.png.ranges" > "$dir/$name/recall_layers.png.ranges"
    if python3 "$CHECK" "$dir/$name" analysis "$dir/analysis" > "$dir/$name.check" 2>&1; then
      fail "check: accepted a heat map with $what"
    elif grep -q "^FAIL  recall_layers: panel 1 $pattern" "$dir/$name.check" &&
      [ "$(grep -c '^FAIL' "$dir/$name.check")" -eq 1 ]; then
      pass "check: refuses a heat map with $what"
    else
      fail "check ($name): $(tr '\n' ' ' < "$dir/$name.check")"
    fi
  done
fi

# 10. Without OBC_PLOT_RANGES the figures write no ranges.
"$OBCACHE" plot "$dir/replay" -o "$dir/plain" --format png --only replay_kl > /dev/null 2>&1 || fail "plain plot failed"
[ -z "$(find "$dir/plain" "$dir/replay" -name '*.ranges' -print -quit)" ] &&
  pass "no OBC_PLOT_RANGES: no ranges written" || fail "ranges written without OBC_PLOT_RANGES"

finish
