# recall_window.gp: recall@k of the oracle's top-k set against the
# perturbation window W (the last W prompt query rows the score sums over;
# W = 1 is TOVA's view, the full prompt H2O's), one curve per score, log2 x
# axis, at one budget k. Left panel: plain top-k (r = 0); right panel: the last
# R positions always kept (r = R). A dotted line marks the main window.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     recall.csv of an analysis folder                    [recall.csv]
#   k        the budget                                                  [40]
#   recent   R for the right panel; 0 draws only the left panel         [0]
#   window   main window to mark with a dotted line          [none drawn]
#   scores   space-separated score names to draw
#   model, oracle   names used in the title            ["model", "oracle@1"]
#   reference  rows of recall.csv drawn (its reference column; "" = a file
#              without one)                                           [""]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='out/recall.csv'; k=40; recent=8; outfile='w.png'" plots/recall_window.gp

fig = "recall_window"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "recall.csv"
if (!exists("k")) k = 40
if (!exists("recent")) recent = 0
if (!exists("scores")) scores = "attn attn2 attn_vl1 attn_maxpool obc_v obc_k obc_vk exact_v exact_k exact_vk remove"
if (!exists("model")) model = "model"
if (!exists("oracle")) oracle = "oracle@1"
if (!exists("reference")) reference = ""
if (!exists("width")) width = (recent > 0 ? 1400 : 1000)
if (!exists("height")) height = 620
load plots_dir . "style.gp"
if (!exists("title")) title = sprintf("Recall@%d of the %s set against the window W\n%s, budget k = %d", k, oracle, model, k)

# Collect one block per (score, panel): W and the mean recall over all heads.
$curves << EOD
EOD
panels = (recent > 0 ? 2 : 1)
do for [s in scores] {
  do for [p = 1:panels] {
    r = (p == 1 ? 0 : recent)
    set table $curves append
    plot data using "window":"recall_mean" with table \
      if (strcol("score") eq s && column("k") == k && column("recent") == r && (reference eq "" || strcol("reference") eq reference))
    unset table
    set print $curves append
    print ""; print ""
    unset print
  }
}
set datafile separator whitespace
set datafile nocolumnheaders

set logscale x 2
set autoscale xfix
set offsets graph 0.04, graph 0.04, 0, 0
set format x "%.0f"
# From 0 to just above the largest value drawn (both panels alike).
stats $curves using 2 nooutput
set yrange [0:share_top(STATS_max)]
set xlabel "window W (last W prompt query rows, log2 scale)"
set ylabel sprintf("recall@%d (share of the oracle's top %d kept)", k, k)
if (exists("window")) { set arrow 1 from window, graph 0 to window, graph 1 nohead dt 3 lw 1.5 lc rgb "#555555" back }
n = words(scores)

set multiplot title title font ",14"
left(p) = (panels == 1 ? 0.08 : (p == 1 ? 0.06 : 0.45))
right(p) = (panels == 1 ? 0.78 : (p == 1 ? 0.40 : 0.79))
do for [p = 1:panels] {
  set lmargin at screen left(p)
  set rmargin at screen right(p)
  set tmargin at screen 0.84
  set bmargin at screen 0.12
  set title (p == 1 ? "top-k by the score (r = 0)" : sprintf("last %d positions always kept (r = %d)", recent, recent))
  if (p == panels) { set key at screen 0.81, 0.84 left top } else { unset key }
  if (p == 2) { unset ylabel }
  plot for [i = 1:n] $curves index ((i - 1) * panels + p - 1) using 1:2 smooth unique \
    with linespoints lc rgb score_colour(word(scores, i)) pt score_point(word(scores, i)) \
    ps 1.2 lw score_width(word(scores, i)) title word(scores, i)
  eval record_ranges
}
unset multiplot
