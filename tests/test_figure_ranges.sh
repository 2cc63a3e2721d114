#!/usr/bin/env bash
# The figures answer at a glance only when their axes fit the data: for the
# figures of an analysis folder (of a tiny synthetic trace), of an eval
# folder (tests/eval_plots_fixture.py) and of a replay sweep (a one-trace
# sweep of the default model, tests/data/replay_sweep), obcache plot runs
# under OBC_PLOT_RANGES, so that every panel's script writes the ranges
# gnuplot drew, and tests/figure_ranges_check.py compares them with what it
# reads from the data files itself: no axis may cut data off or leave more
# than a third of its length empty. The checker itself must fail on ranges
# that do either.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?path to the obcache binary}" "${OBC_SOURCE_DIR:?source tree}"
scratch test_figure_ranges
CHECK="$OBC_SOURCE_DIR/tests/figure_ranges_check.py"

# plot_ranges KIND FOLDER FIGURES: those figures as PNGs under $dir/KIND.out,
# their ranges under $dir/KIND.ranges, then the check (in $dir/KIND.check).
plot_ranges() {
  mkdir -p "$dir/$1.ranges"
  if ! OBC_PLOT_RANGES="$dir/$1.ranges" "$OBCACHE" plot "$2" -o "$dir/$1.out" --format png \
    --only "$3" > /dev/null 2> "$dir/$1.err"; then
    fail "$1: obcache plot failed: $(head -1 "$dir/$1.err")"
    return
  fi
  if python3 "$CHECK" "$dir/$1.ranges" "$1" "$2" "$dir/$1.out" > "$dir/$1.check" 2>&1; then
    pass "$1: $(grep -c '^ok' "$dir/$1.check") figures, every axis fits its data"
  else
    fail "$1: $(grep -v '^ok' "$dir/$1.check" | tr '\n' ' ')"
  fi
}

# 1. A real analysis of a tiny synthetic trace (with a needle span), the
#    recent window 8 above the smallest budgets.
if "$OBCACHE" synth -o "$dir/t.h5" --prompt 256 --rows 32 > /dev/null 2> "$dir/err" &&
   "$OBCACHE" analyze "$dir/t.h5" -o "$dir/analysis" --window 4,16 --recent 8 --oracle 1 \
     > /dev/null 2>> "$dir/err"; then
  plot_ranges analysis "$dir/analysis" recall_k,needle_k,recall_window,recall_oracles,bias_share,bias_windows,taylor
else
  fail "synthetic analysis: $(head -1 "$dir/err")"
fi

# 2. An eval folder: accuracy with intervals, the forest plot, recall quartiles.
python3 "$OBC_SOURCE_DIR/tests/eval_plots_fixture.py" "$dir/eval" > /dev/null || fatal "eval fixture"
plot_ranges eval "$dir/eval" eval_accuracy,eval_paired,eval_recall

# 3. A replay sweep: one trace, so shares of 0 or 1 and policies that coincide.
cp -r "$OBC_SOURCE_DIR/tests/data/replay_sweep" "$dir/replay"
plot_ranges replay "$dir/replay" replay_needle,replay_kl,replay_kl_steps

# 4. The check fails on an axis three times too tall and on one that cuts the
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

# 5. Without OBC_PLOT_RANGES the figures write no ranges.
"$OBCACHE" plot "$dir/replay" -o "$dir/plain" --format png --only replay_kl > /dev/null 2>&1 || fail "plain plot failed"
[ -z "$(find "$dir/plain" "$dir/replay" -name '*.ranges' -print -quit)" ] &&
  pass "no OBC_PLOT_RANGES: no ranges written" || fail "ranges written without OBC_PLOT_RANGES"

finish
