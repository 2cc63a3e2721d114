# bias_share.gp: the structural bias of each score. For one window W and
# budget k, the share of the selected positions that falls in each bucket of
# relative prompt position p/s, one curve per score and a thick black one for
# the oracle. A score without bias follows the oracle; attention sums that pile
# up on early tokens rise at the left. The last bucket (the end of the prompt,
# where every score puts most of its selection) has its own panel on the
# right, bars from 0, so that the curves on the left are scaled to the rest
# of the prompt; the dotted line there is a uniform spread.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     bias.csv of an analysis folder                        [bias.csv]
#   window   perturbation window W                   [largest W in the data]
#   k        the budget                                                  [40]
#   recent   recent window R of the selection                            [0]
#   scores   space-separated names to draw (include the oracle's name,
#            "oracle@1" or "oracle@T", to draw its curve)
#   model    model name used in the title                           ["model"]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='out/bias.csv'; window=16; k=40; outfile='b.png'" plots/bias_share.gp

fig = "bias_share"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "bias.csv"
if (!exists("k")) k = 40
if (!exists("recent")) recent = 0
if (!exists("scores")) scores = "attn attn2 attn_vl1 attn_maxpool obc_v obc_k obc_vk exact_v exact_k exact_vk remove oracle@1"
if (!exists("model")) model = "model"
if (!exists("width")) width = 1300
if (!exists("height")) height = 620
load plots_dir . "style.gp"
if (!exists("window")) { stats data using "window" nooutput; window = int(STATS_max) }
stats data using "bucket" nooutput
buckets = int(STATS_max) + 1
if (!exists("title")) title = sprintf("Where the top-%d selection falls along the prompt\n%s, window W = %d, budget k = %d%s", k, model, window, k, (recent > 0 ? sprintf(", recent %d", recent) : ""))

# One pass over the file for the rows of the window, budget and recent window; the passes below read
# this copy of their fields (the same text) instead of the whole file.
set print $rows
print "score,window,recent,k,bucket_lo,bucket_hi,selected_share"
unset print
set table $rows append
plot data using (sprintf("%s,%s,%s,%s,%s,%s,%s", strcol("score"), strcol("window"), strcol("recent"), strcol("k"), strcol("bucket_lo"), strcol("bucket_hi"), strcol("selected_share"))) with table \
  if (column("window") == window && column("k") == k && column("recent") == recent)
unset table
data = "$rows"

# Collect one block per score: bucket midpoint and the selected share.
$curves << EOD
EOD
do for [s in scores] {
  set table $curves append
  plot data using (0.5 * (column("bucket_lo") + column("bucket_hi"))):"selected_share" with table \
    if (strcol("score") eq s && column("window") == window && column("k") == k && column("recent") == recent)
  unset table
  set print $curves append
  print ""; print ""
  unset print
}
set datafile separator whitespace
set datafile nocolumnheaders

last_lo = 1.0 - 1.0 / buckets
# The largest share before the last bucket sets the left panel's y axis (and
# the uniform share 1/buckets stays in range).
stats $curves using ($1 < last_lo ? $2 : NaN) nooutput
early_max = (STATS_max > 1.0 / buckets ? STATS_max : 1.0 / buckets)
n = words(scores)

set multiplot title title font ",13"
set tmargin at screen 0.84
set bmargin at screen 0.12
set lmargin at screen 0.075
set rmargin at screen 0.59
set title sprintf("the prompt before its last bucket (p / s < %.2f)", last_lo)
set xrange [0:last_lo]
set xtics 0.1
set yrange [0:share_top(early_max)]
set xlabel "relative position p / s in the prompt (bucket midpoint; 0 = first token)"
set ylabel sprintf("share of the %d selected positions", k)
set key at screen 0.605, 0.84 left top
plot for [i = 1:n] $curves index (i - 1) using ($1 < last_lo ? $1 : NaN):2 smooth unique \
       with linespoints lc rgb score_colour(word(scores, i)) pt score_point(word(scores, i)) \
       ps 1.0 lw score_width(word(scores, i)) title word(scores, i), \
     1.0 / buckets with lines dt 3 lw 1.5 lc rgb "#555555" title sprintf("uniform (1/%d)", buckets)
eval record_ranges

# The last bucket: one bar per score, its share printed at the bar's end.
unset key
set lmargin at screen 0.80
set rmargin at screen 0.95
set title sprintf("the last bucket (p / s > %.2f)", last_lo)
set autoscale xy
stats $curves using ($1 > last_lo ? $2 : NaN) nooutput
set xrange [0:share_top(STATS_max) * 1.12]
set xtics auto
set yrange [n + 0.5:0.5]
set ytics () scale 0
do for [i = 1:n] { set ytics add (word(scores, i) i) }
set grid noytics
set xlabel "share in the last bucket"
unset ylabel
plot for [i = 1:n] $curves index (i - 1) using ($1 > last_lo ? $2 / 2 : NaN):(i):(0):($2):(i - 0.35):(i + 0.35) \
       with boxxyerror fc rgb score_colour(word(scores, i)) fs solid 0.8, \
     for [i = 1:n] $curves index (i - 1) using ($1 > last_lo ? $2 : NaN):(i):(sprintf(" %.2f", $2)) \
       with labels left font ",8"
eval record_ranges
unset multiplot
