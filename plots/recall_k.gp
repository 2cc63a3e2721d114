# recall_k.gp: recall@k of the oracle's top-k set against the budget k, one
# curve per score, at one perturbation window W. Left panel: the plain top-k
# selection (r = 0); right panel: the last R prompt positions are always kept
# and the other k - R chosen by the score (r = R). Higher is better; the
# paper's headline is k = 40.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     recall.csv of an analysis folder                    [recall.csv]
#   window   perturbation window W                   [largest W in the data]
#   recent   R for the right panel; 0 draws only the left panel         [0]
#   scores   space-separated score names to draw
#   ks       space-separated budgets to label on the x axis   [automatic]
#   model, oracle   names used in the title            ["model", "oracle@1"]
#   reference  rows of recall.csv drawn (its reference column; "" = a file
#              without one)                                           [""]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='out/recall.csv'; window=16; recent=8; outfile='k.png'" plots/recall_k.gp

fig = "recall_k"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "recall.csv"
if (!exists("recent")) recent = 0
if (!exists("scores")) scores = "attn attn2 attn_vl1 attn_maxpool obc_v obc_k obc_vk exact_v exact_k exact_vk remove"
if (!exists("model")) model = "model"
if (!exists("oracle")) oracle = "oracle@1"
if (!exists("reference")) reference = ""
if (!exists("width")) width = (recent > 0 ? 1400 : 1000)
if (!exists("height")) height = 620
load plots_dir . "style.gp"
if (!exists("window")) { stats data using "window" nooutput; window = int(STATS_max) }
if (!exists("title")) title = sprintf("Recall of the %s top-k set against the budget k\n%s, window W = %d", oracle, model, window)

# Collect one block per (score, panel): k and the mean recall over all heads.
$curves << EOD
EOD
panels = (recent > 0 ? 2 : 1)
do for [s in scores] {
  do for [p = 1:panels] {
    r = (p == 1 ? 0 : recent)
    set table $curves append
    plot data using "k":"recall_mean" with table \
      if (strcol("score") eq s && column("window") == window && column("recent") == r && (reference eq "" || strcol("reference") eq reference))
    unset table
    set print $curves append
    print ""; print ""
    unset print
  }
}
# Each panel's range of k and the largest value of both panels, from the
# rows drawn: the x axis of a panel spans its own budgets (with r = R the
# smallest k are those above R), the y axis runs from 0 to that value.
in_scores(s) = strstrt(" " . scores . " ", " " . s . " ") > 0
y_max = 0
do for [p = 1:panels] {
  r = (p == 1 ? 0 : recent)
  stats data using (in_scores(strcol("score")) && column("window") == window && column("recent") == r && (reference eq "" || strcol("reference") eq reference) ? column("k") : NaN):(in_scores(strcol("score")) && column("window") == window && column("recent") == r && (reference eq "" || strcol("reference") eq reference) ? column("recall_mean") : NaN) nooutput
  eval sprintf("k_min_%d = STATS_min_x; k_max_%d = STATS_max_x", p, p)
  if (STATS_max_y > y_max) { y_max = STATS_max_y }
}
set datafile separator whitespace
set datafile nocolumnheaders

set logscale x 2
if (!exists("ks")) { set autoscale xfix; set offsets graph 0.06, graph 0.06, 0, 0 }
# One tic per budget; a label only where it does not crowd its labelled
# neighbour on the right (at least 0.45 of a doubling away; the largest k is
# always labelled).
if (exists("ks")) {
  set xtics ()
  last_label = 0
  do for [i = words(ks):1:-1] {
    kk = word(ks, i) + 0
    if (last_label == 0 || log(1.0 * last_label / kk) / log(2) >= 0.45) { set xtics add (sprintf("%d", kk) kk); last_label = kk } else { set xtics add ("" kk) }
  }
}
set yrange [0:share_top(y_max)]
set xlabel "budget k (tokens kept per KV head)"
set ylabel "recall@k (share of the oracle's top k kept)"
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
  if (exists("ks")) { set xrange [value(sprintf("k_min_%d", p)) / 1.3 : value(sprintf("k_max_%d", p)) * 1.3] }
  plot for [i = 1:n] $curves index ((i - 1) * panels + p - 1) using 1:2 smooth unique \
    with linespoints lc rgb score_colour(word(scores, i)) pt score_point(word(scores, i)) \
    ps 1.2 lw score_width(word(scores, i)) title word(scores, i)
  eval record_ranges
}
unset multiplot
