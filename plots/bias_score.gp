# bias_score.gp: the structural bias seen in the scores themselves. For one
# window W, the mean normalised score per bucket of relative prompt position
# p/s (score_p / mean_p score_p, averaged over the bucket's positions and over
# heads), one curve per score and a thick black one for the oracle, on a log
# y axis: 1 (dotted) is an average token; early tokens that take part in more
# query rows pile up score and rise at the left.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     bias.csv of an analysis folder                        [bias.csv]
#   window   perturbation window W                   [largest W in the data]
#   k        the budget whose rows to read (the score does not depend on it,
#            the analyser repeats it per k)                              [40]
#   recent   recent window R of the rows to read                         [0]
#   scores   space-separated names to draw (include "oracle@1"/"oracle@T")
#   model    model name used in the title                           ["model"]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='out/bias.csv'; window=16; k=40; outfile='s.png'" plots/bias_score.gp

fig = "bias_score"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "bias.csv"
if (!exists("k")) k = 40
if (!exists("recent")) recent = 0
if (!exists("scores")) scores = "attn attn2 attn_vl1 attn_maxpool obc_v obc_k obc_vk exact_v exact_k exact_vk remove oracle@1"
if (!exists("model")) model = "model"
if (!exists("width")) width = 1100
if (!exists("height")) height = 620
load plots_dir . "style.gp"
if (!exists("window")) { stats data using "window" nooutput; window = int(STATS_max) }
if (!exists("title")) title = sprintf("Mean normalised score along the prompt\n%s, window W = %d", model, window)

# One pass over the file for the rows of the window, budget and recent window; the passes below read
# this copy of their fields (the same text) instead of the whole file.
set print $rows
print "score,window,recent,k,bucket_lo,bucket_hi,mean_norm_score"
unset print
set table $rows append
plot data using (sprintf("%s,%s,%s,%s,%s,%s,%s", strcol("score"), strcol("window"), strcol("recent"), strcol("k"), strcol("bucket_lo"), strcol("bucket_hi"), strcol("mean_norm_score"))) with table \
  if (column("window") == window && column("k") == k && column("recent") == recent)
unset table
data = "$rows"

# Collect one block per score: bucket midpoint and the mean normalised score
# (positive values only: the axis is logarithmic).
$curves << EOD
EOD
do for [s in scores] {
  set table $curves append
  plot data using (0.5 * (column("bucket_lo") + column("bucket_hi"))):"mean_norm_score" with table \
    if (column("mean_norm_score") > 0 && strcol("score") eq s && column("window") == window && column("k") == k && column("recent") == recent)
  unset table
  set print $curves append
  print ""; print ""
  unset print
}
set datafile separator whitespace
set datafile nocolumnheaders

# The y range from the curves and the average token (1), a factor 1.5
# beyond them on the log axis (as replay_kl.gp).
undefine STATS_*
stats $curves using 2 nooutput
y_lo = exists("STATS_min") && STATS_min < 1 ? STATS_min : 1.0
y_hi = exists("STATS_max") && STATS_max > 1 ? STATS_max : 1.0

set title title font ",13" noenhanced
set xrange [0:1]
set xtics 0.1
set logscale y 10
eval log_tics_y
set yrange [y_lo / 1.5 : y_hi * 1.5]
set xlabel "relative position p / s in the prompt (bucket midpoint; 0 = first token, 1 = last)"
set ylabel "mean of score_p / mean_p(score_p) in the bucket (log scale)" noenhanced
set key outside right top
set rmargin 21
n = words(scores)
plot for [i = 1:n] $curves index (i - 1) using 1:2 smooth unique \
       with linespoints lc rgb score_colour(word(scores, i)) pt score_point(word(scores, i)) \
       ps 1.0 lw score_width(word(scores, i)) title word(scores, i), \
     1.0 with lines dt 3 lw 1.5 lc rgb "#555555" title "average token"
eval record_ranges
