# taylor.gp: does the second-order Taylor score predict the exact error?
# Four log-log scatter panels over a subsample of (layer, KV head, position)
# points at the main window: exact_v against obc_v (zeroing the value row: the
# Taylor form is exact, so every point lies on the diagonal), exact_k against
# obc_k, exact_vk against obc_vk, and the true eviction error (oracle) against
# the window's removal error (remove). The dashed line is y = x; points that
# hug it mean the score ranks tokens like the error it approximates.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     taylor.csv of an analysis folder                    [taylor.csv]
#   window   the window the points were taken at (title only)    [not shown]
#   rho_v, rho_k, rho_vk, rho_remove   Spearman rank correlations to print
#            in the panel titles (numbers; omitted when not set)
#   decades  widest span of the axes, in decades below the largest value;
#            points below are counted in the key, not drawn            [16]
#   model, oracle   names used in the title            ["model", "oracle@1"]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='out/taylor.csv'; window=16; outfile='t.png'" plots/taylor.gp

fig = "taylor"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "taylor.csv"
if (!exists("model")) model = "model"
if (!exists("oracle")) oracle = "oracle@1"
if (!exists("decades")) decades = 16
if (!exists("width")) width = 1200
if (!exists("height")) height = 1000
load plots_dir . "style.gp"
if (!exists("title")) title = sprintf("Taylor scores against the exact errors they approximate\n%s%s; each panel on its own range (the same on both axes), dashed: y = x", model, (exists("window") ? sprintf(", window W = %d", window) : ""))

# Panel p plots column ys[p] against column xs[p].
xs = "obc_v obc_k obc_vk remove"
ys = "exact_v exact_k exact_vk oracle"
# A point is drawn when both values are positive (the axes are logarithmic).
both_positive(a, b) = column(a) > 0 && column(b) > 0
rho_text(name) = exists(name) ? sprintf("   (Spearman rho = %.3f)", value(name)) : ""
rhos = "rho_v rho_k rho_vk rho_remove"
panel_what(p) = p == 1 ? "zero the value row" : p == 2 ? "zero the key row" : p == 3 ? "zero both rows" : "evict the token"

set logscale xy 10
set format x "10^{%T}"
set format y "10^{%T}"
set termoption enhanced
# No key over the points: the count of points and of those below the axes
# is the panel title's second line.
unset key
set size ratio -1
set multiplot layout 2, 2 title title font ",14" noenhanced margins 0.08, 0.97, 0.06, 0.88 spacing 0.09, 0.14
do for [p = 1:4] {
  xcol = word(xs, p)
  ycol = word(ys, p)
  colour = score_colour(xcol)
  panel_title = sprintf("%s against %s%s", ycol, xcol, rho_text(word(rhos, p)))
  set title panel_title noenhanced
  set xlabel (p < 4 ? sprintf("%s (Taylor score)", xcol) : "remove (exact removal error over the window)") noenhanced
  set ylabel (p < 4 ? sprintf("%s (exact error: %s)", ycol, panel_what(p)) : sprintf("%s (true eviction error at decode)", oracle)) noenhanced
  # Both axes share the range of the panel's points so y = x is the diagonal.
  set autoscale xy
  undefine STATS_*
  stats data using (both_positive(xcol, ycol) ? column(xcol) : NaN):(both_positive(xcol, ycol) ? column(ycol) : NaN) nooutput
  if (exists("STATS_min_x") && STATS_records > 0) {
    points = STATS_records
    lo = floor(log10(STATS_min_x < STATS_min_y ? STATS_min_x : STATS_min_y))
    hi = ceil(log10(STATS_max_x > STATS_max_y ? STATS_max_x : STATS_max_y))
    if (hi <= lo) { hi = lo + 1 }
    # At most `decades` decades below the largest value, so that a few tiny
    # outliers (an oracle of 1e-35) do not squeeze the cloud into a corner;
    # the key says how many points fall below the axes.
    below = 0
    if (hi - lo > decades) {
      lo = hi - decades
      stats data using (both_positive(xcol, ycol) && (column(xcol) < 10.0**lo || column(ycol) < 10.0**lo) ? 1 : NaN) nooutput
      below = STATS_records
    }
    set xrange [10.0**lo:10.0**hi]
    set yrange [10.0**lo:10.0**hi]
    unset label 1
    set title panel_title . sprintf("\n%d points", points) . (below > 0 ? sprintf(", %d below 1e%d not drawn", below, lo) : "") noenhanced
    plot data using (both_positive(xcol, ycol) ? column(xcol) : NaN):(column(ycol)) \
           with points pt 7 ps 0.5 lc rgb ("#60" . colour[2:7]), \
         x with lines dt 2 lw 1.5 lc rgb "#333333"
    eval record_ranges
  } else {
    # Nothing positive to place on log axes (e.g. an oracle that is zero
    # everywhere): an empty panel that says so.
    set xrange [1e-8:1]
    set yrange [1e-8:1]
    set style textbox opaque noborder
    set label 1 "no point with both values > 0" at graph 0.5, 0.5 center front boxed noenhanced
    plot x with lines dt 2 lw 1.5 lc rgb "#333333"
    eval record_ranges
  }
}
unset multiplot
