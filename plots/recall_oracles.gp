# recall_oracles.gp: recall@k of each score against every oracle reference
# of the analysis, one panel per reference (oracle@1, the paper's: the first
# decode step; oracle@T: every captured step; the --oracle range when it is
# neither), at the main window without a recent window. A score that only
# finds what the first answer token needs does well on the left and badly on
# the right (docs/SCIENCE.md, "The oracle").
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data        recall.csv of `obcache analyze` (with its reference column)
#   references  space-separated reference names, one panel each; "" (an older
#               report without a reference column): one panel   ["oracle@1 oracle@T"]
#   window      the window W drawn                          [largest in the data]
#   scores      space-separated score names to draw                 [all 11]
#   model       model name used in the title                       ["model"]
#   title       replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='t-analysis/recall.csv'; window=64; outfile='o.png'" plots/recall_oracles.gp

fig = "recall_oracles"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "recall.csv"
if (!exists("references")) references = "oracle@1 oracle@T"
if (!exists("scores")) scores = "attn attn2 attn_vl1 attn_maxpool obc_v obc_k obc_vk exact_v exact_k exact_vk remove"
if (!exists("model")) model = "model"
panels = (references eq "" ? 1 : words(references))
if (!exists("width")) width = 520 * panels + 260
if (!exists("height")) height = 620
load plots_dir . "style.gp"
if (!exists("window")) { stats data using "window" nooutput; window = int(STATS_max) }
if (!exists("title")) title = sprintf("Recall against each oracle reference\n%s, window W = %d, no recent window", model, window)

# An older analysis (recall.csv without a reference column) has one oracle:
# one panel, every row.
filtered = (references ne "")
if (!filtered) references = (exists("oracle") ? oracle : "oracle@1")
# One block per (score, reference): k and the mean recall over all heads.
$curves << EOD
EOD
do for [s in scores] {
  do for [p = 1:panels] {
    ref = word(references, p)
    set table $curves append
    plot data using "k":"recall_mean" with table \
      if (strcol("score") eq s && column("window") == window && column("recent") == 0 && (!filtered || strcol("reference") eq ref))
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
set offsets graph 0.06, graph 0.06, 0, 0
# From 0 to just above the largest value drawn (both panels alike).
stats $curves using 2 nooutput
set yrange [0:share_top(STATS_max)]
set xlabel "budget k (tokens kept per KV head)"
set ylabel "recall@k (share of the reference's top k kept)"
n = words(scores)
span = 0.80 / panels
set multiplot title title font ",14"
do for [p = 1:panels] {
  set lmargin at screen 0.06 + (p - 1) * span
  set rmargin at screen 0.06 + p * span - 0.04
  set tmargin at screen 0.84
  set bmargin at screen 0.12
  set title sprintf("against %s", word(references, p))
  if (p == panels) { set key at screen 0.88, 0.84 left top } else { unset key }
  if (p == 2) { unset ylabel }
  plot for [i = 1:n] $curves index ((i - 1) * panels + p - 1) using 1:2 smooth unique \
    with linespoints lc rgb score_colour(word(scores, i)) pt score_point(word(scores, i)) \
    ps 1.2 lw score_width(word(scores, i)) title word(scores, i)
  eval record_ranges
}
unset multiplot
