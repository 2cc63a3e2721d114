# eval_paired.gp: does + OBCache help? A forest plot of each pairing of a
# policy with its "+ OBCache" twin on the same samples: RULER's score
# difference (paired minus baseline; for a folder without it, the accuracy
# difference), its paired bootstrap 95% interval, and the p of its test (the
# sign-flip test of the score, or the exact McNemar test) in the row's label; one row per (pair, budget[,
# protocol]), the pooled "all" rows when the run has them. Right of the zero
# line the paired policy scores higher; rows with p < 0.05 are
# drawn in obc_vk's colour.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     eval_paired.csv written by `obcache plot` (row, label,
#            difference, ci_low, ci_high, p)                [eval_paired.csv]
#   metric   what the difference is             [accuracy difference]
#   test     the test of p                      [McNemar]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='ev/plots/eval_paired.csv'; outfile='p.png'" plots/eval_paired.gp

fig = "eval_paired"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "eval_paired.csv"
if (!exists("metric")) metric = "accuracy difference"
if (!exists("test")) test = "McNemar"
set datafile separator comma
set datafile columnheaders
stats data using "row" nooutput
n_rows = STATS_records
# The x range holds every interval and the zero line, with a margin.
stats data using "ci_low" nooutput
x_low = (STATS_min < 0 ? STATS_min : 0)
stats data using "ci_high" nooutput
x_high = (STATS_max > 0 ? STATS_max : 0)
x_pad = (x_high - x_low > 0 ? 0.08 * (x_high - x_low) : 0.05)
if (!exists("width")) width = 1100
if (!exists("height")) height = 28 * n_rows + 200
load plots_dir . "style.gp"
if (!exists("title")) title = "Does + OBCache help?\n" . metric . " (paired minus baseline) with its paired bootstrap 95% interval; " . test . " p"

significant = "#9467bd"
other = "#7f7f7f"
set xrange [x_low - x_pad:x_high + x_pad]
set yrange [n_rows + 0.5:0.5]
set ytics () scale 0 font ",9"
set grid noytics
set border 1
set xlabel metric . " (paired minus baseline)"
set arrow 1 from first 0, graph 0 to first 0, graph 1 nohead lc rgb "#000000" lw 1.5 dt 1 back
set lmargin 46
set tmargin 5
set bmargin 6
set errorbars small
set key outside bottom center horizontal font ",9"
set multiplot title title font ",14"
colour_of(p) = p < 0.05 ? 0x9467bd : 0x7f7f7f
plot data using "difference":"row":"ci_low":"ci_high":(colour_of(column("p"))):ytic(strcol("label")) \
       with xerrorbars pt 7 ps 1.2 lw 2 lc rgb variable notitle, \
     keyentry with points pt 7 ps 1.2 lc rgb significant title test . " p < 0.05", \
     keyentry with points pt 7 ps 1.2 lc rgb other title "p >= 0.05"
eval record_ranges
unset multiplot
