# sweep_recall.gp: recall@k over a sweep, one small heat map per score over
# (context length, needle depth), all on the same colour scale: does a score
# keep finding the oracle's tokens as the context grows and the needle moves?
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     sweep_recall.csv written by `obcache plot` (length, depth, score,
#            k, recall: one row per cell and score, mean over the cell's
#            needles)                                       [sweep_recall.csv]
#   scores   space-separated score names, one panel each, in this order
#   k        the budget, for the title                                   [40]
#   lengths, depths  space-separated values in axis order  [all in the data]
#   model    model name used in the title                   [none shown]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='sweep/plots/sweep_recall.csv'; outfile='r.png'" plots/sweep_recall.gp

fig = "sweep_recall"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "sweep_recall.csv"
if (!exists("k")) k = 40
if (!exists("scores")) scores = "attn attn2 vatp snapkv obc_v obc_k obc_vk exact_v exact_k exact_vk remove"
if (!exists("model")) model = ""
load plots_dir . "sweep_axes.gp"
n = words(scores)
columns = (n <= 3 ? n : (n <= 8 ? 4 : 4))
rows = int(ceil(n / (1.0 * columns)))
if (!exists("width")) width = columns * (90 + 60 * n_lengths) + 160
if (!exists("height")) height = rows * (90 + 34 * n_depths) + 90
load plots_dir . "style.gp"
if (!exists("title")) title = sprintf("Recall@%d per sweep cell", k) . (model eq "" ? "" : "  -  " . model)

set xrange [0.5:n_lengths + 0.5]
set yrange [n_depths + 0.5:0.5]
set xtics () scale 0 font ",9"
do for [i = 1:n_lengths] { set xtics add (word(lengths, i) i) }
set ytics () scale 0 font ",9"
do for [i = 1:n_depths] { set ytics add (word(depths, i) . "%%" i) }
set xlabel "length" font ",9" offset 0, 0.5
set ylabel "depth" font ",9" offset 1, 0
set cbrange [0:1]
set palette defined (0 "#440154", 0.25 "#3b528b", 0.5 "#21918c", 0.75 "#5ec962", 1 "#fde725")
set grid noxtics noytics
set border 0
unset key
unset colorbox
cell_x(s) = strcol("score") eq s ? length_index(column("length")) : NaN

# Panels fill the left part of the page; the colour bar sits at the right.
panel_w = (0.97 - 0.10) / columns
panel_h = 0.86 / rows
set multiplot title title font ",14"
do for [p = 1:n] {
  s = word(scores, p)
  col = (p - 1) % columns
  row = (p - 1) / columns
  set lmargin at screen 0.06 + col * panel_w * 0.95
  set rmargin at screen 0.06 + col * panel_w * 0.95 + panel_w * 0.75
  set tmargin at screen 0.90 - row * panel_h - 0.04
  set bmargin at screen 0.90 - (row + 1) * panel_h + 0.06
  set title s font ",11" offset 0, -0.5
  if (p == n) { set colorbox user origin screen 0.88, 0.15 size screen 0.015, 0.6; set cbtics 0.2 font ",9"; set cblabel sprintf("recall@%d", k) font ",10" }
  plot data using (cell_x(s)):(depth_index(column("depth"))):(0.5):(0.5):(column("recall")) \
         with boxxyerror fc palette, \
       data using (cell_x(s)):(depth_index(column("depth"))):(sprintf("%.2f", column("recall"))): \
         (column("recall") < 0.55 ? 0xffffff : 0x000000) with labels font ",8" tc rgb variable
}
unset multiplot
