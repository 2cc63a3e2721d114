# sweep_needle.gp: needle retrieval over a sweep. One cell per (context
# length, needle depth); green when the full-cache model's answer contained
# the needle's value, red when it did not (with several needles per cell, the
# share found). This is the classic Needle-in-a-Haystack picture: it says
# where the model itself fails, before any eviction.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     sweep_needle.csv written by `obcache plot` (length, depth,
#            needles, found, answer_ok: one row per cell, shares over the
#            cell's needles)                                [sweep_needle.csv]
#   column_found  the column to show: "found" or "answer_ok"          [found]
#   lengths, depths  space-separated values in axis order  [all in the data]
#   model    model name used in the title                   [none shown]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='sweep/plots/sweep_needle.csv'; outfile='n.png'" plots/sweep_needle.gp

fig = "sweep_needle"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "sweep_needle.csv"
if (!exists("column_found")) column_found = "found"
if (!exists("model")) model = ""
load plots_dir . "sweep_axes.gp"
if (!exists("width")) width = 360 + 110 * (n_lengths > 3 ? n_lengths : 3)
if (!exists("height")) height = 200 + 50 * (n_depths > 3 ? n_depths : 3)
load plots_dir . "style.gp"
if (!exists("title")) title = "Needle retrieval by the full-cache model" . (model eq "" ? "" : "\n" . model)

cell_label(v) = v >= 1 ? "found" : (v <= 0 ? "missed" : sprintf("%.0f%% found", 100 * v))
set title title font ",13"
set xrange [0.5:n_lengths + 0.5]
set yrange [n_depths + 0.5:0.5]
set xtics () scale 0
do for [i = 1:n_lengths] { set xtics add (word(lengths, i) i) }
set ytics () scale 0
do for [i = 1:n_depths] { set ytics add (word(depths, i) . "%%" i) }
set xlabel "context length (tokens)"
set ylabel "needle depth in the context"
set cblabel "share of needles found"
set cbrange [0:1]
set cbtics 0.25
set palette defined (0 "#c0392b", 0.5 "#f1c40f", 1 "#27ae60")
set grid noxtics noytics
set border 0
unset key
set rmargin 14
plot data using (length_index(column("length"))):(depth_index(column("depth"))):(0.5):(0.5):(column(column_found)) \
       with boxxyerror fc palette, \
     data using (length_index(column("length"))):(depth_index(column("depth"))):(cell_label(column(column_found))) \
       with labels font ",10" tc rgb "#000000"
eval record_ranges
