# bias_windows.gp: how the structural bias grows with the window. One panel
# per score; in each, the share of the top-k selection per bucket of relative
# position p/s for every window W (dark = short window, yellow-green = long), and the
# oracle's share in black. A longer window lets early tokens take part in more
# query rows, so attention sums drift to the left; a score that stays close
# to the black curve for every W is free of that bias.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     bias.csv of an analysis folder                        [bias.csv]
#   windows  space-separated windows to draw               [1 2 4 ... 1024]
#   k        the budget                                                  [40]
#   scores   space-separated scores, one panel each      [attn attn_vl1 obc_vk remove]
#   oracle   the oracle's name in bias.csv                         [oracle@1]
#   model    model name used in the title                           ["model"]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='out/bias.csv'; windows='1 4 16 64'; outfile='bw.png'" plots/bias_windows.gp

fig = "bias_windows"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "bias.csv"
if (!exists("k")) k = 40
if (!exists("windows")) windows = "1 2 4 8 16 32 64 128 256 512 1024"
if (!exists("scores")) scores = "attn attn_vl1 obc_vk remove"
if (!exists("oracle")) oracle = "oracle@1"
if (!exists("model")) model = "model"
n = words(scores)
n_windows = words(windows)
columns = (n <= 2 ? n : 2)
rows = int(ceil(n / (1.0 * columns)))
if (!exists("width")) width = 180 + 520 * columns
if (!exists("height")) height = 90 + 330 * rows
load plots_dir . "style.gp"
if (!exists("title")) title = sprintf("How the top-%d selection moves along the prompt as the window W grows\n%s, budget k = %d", k, model, k)

# One pass over the file for the rows of budget k and no recent window; the passes below read
# this copy of their fields (the same text) instead of the whole file.
set print $rows
print "score,window,recent,k,bucket_lo,bucket_hi,selected_share"
unset print
set table $rows append
plot data using (sprintf("%s,%s,%s,%s,%s,%s,%s", strcol("score"), strcol("window"), strcol("recent"), strcol("k"), strcol("bucket_lo"), strcol("bucket_hi"), strcol("selected_share"))) with table \
  if (column("k") == k && column("recent") == 0)
unset table
data = "$rows"

# One block per (score, window), then the oracle's block (its selection does
# not depend on W: the first window's rows are used).
$curves << EOD
EOD
do for [s in scores] {
  do for [w in windows] {
    set table $curves append
    plot data using (0.5 * (column("bucket_lo") + column("bucket_hi"))):"selected_share" with table \
      if (strcol("score") eq s && column("window") == w && column("k") == k && column("recent") == 0)
    unset table
    set print $curves append
    print ""; print ""
    unset print
  }
}
w1 = word(windows, 1) + 0
set table $curves append
plot data using (0.5 * (column("bucket_lo") + column("bucket_hi"))):"selected_share" with table \
  if (strcol("score") eq oracle && column("window") == w1 && column("k") == k && column("recent") == 0)
unset table
set datafile separator whitespace
set datafile nocolumnheaders

# Window colours: viridis from dark (shortest W) to yellow-green (longest).
set palette defined (0 "#440154", 0.25 "#3b528b", 0.5 "#21918c", 0.75 "#5ec962", 1 "#b5de2b")
window_frac(j) = (n_windows <= 1 ? 0 : (j - 1.0) / (n_windows - 1))
unset colorbox

# The prompt before its last bucket, as the left panel of bias_share: the
# last bucket (the end of the prompt, where every score puts most of its
# selection) would set the scale and press the early buckets against 0; the
# panel titles give its range of shares.
# (Equal buckets: the first midpoint is half a bucket.)
stats $curves using 1 nooutput
last_lo = STATS_max - STATS_min
stats $curves using ($1 < last_lo ? $2 : NaN) nooutput
y_top = share_top(STATS_max)
set yrange [0:y_top]
set xrange [0:last_lo]
set xtics 0.2
set xlabel sprintf("relative position p / s (before the last bucket, p / s < %.2f)", last_lo)
set ylabel sprintf("share of the %d selected", k)
set multiplot layout rows, columns title title font ",14" margins 0.07, 0.84, 0.09, 0.86 spacing 0.07, 0.16
do for [p = 1:n] {
  s = word(scores, p)
  set autoscale xy
  stats $curves index ((p - 1) * n_windows):((p - 1) * n_windows + n_windows - 1) using ($1 > last_lo ? $2 : NaN) nooutput
  last_text = sprintf("   (last bucket: %.2f to %.2f)", STATS_min, STATS_max)
  set xrange [0:last_lo]
  set yrange [0:y_top]
  set title s . last_text font ",12"
  if (p == 1) { set key at screen 0.86, 0.86 left top title "window W" } else { unset key }
  plot for [j = 1:n_windows] $curves index ((p - 1) * n_windows + j - 1) using ($1 < last_lo ? $1 : NaN):2 smooth unique \
         with lines lw 2 lc palette frac window_frac(j) title sprintf("W = %s", word(windows, j)), \
       $curves index (n * n_windows) using ($1 < last_lo ? $1 : NaN):2 smooth unique \
         with lines lw 3 dt 2 lc rgb score_colour(oracle) title oracle
  eval record_ranges
}
unset multiplot
