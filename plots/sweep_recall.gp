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
if (!exists("scores")) scores = "attn attn2 attn_vl1 attn_maxpool obc_v obc_k obc_vk exact_v exact_k exact_vk remove"
if (!exists("model")) model = ""
load plots_dir . "sweep_axes.gp"
n = words(scores)
columns = (n <= 4 ? n : 4)
rows = int(ceil(n / (1.0 * columns)))
# The layout in design pixels: each panel has room for its title, tic labels
# and axis labels around a grid of cells; a band on top for the title and one
# on the right for the colour bar. Fractions of it place the panels, so a
# -e "width=...; height=..." only scales the figure.
cells_w = (60 * n_lengths > 160 ? 60 * n_lengths : 160)
cells_h = (34 * n_depths > 110 ? 34 * n_depths : 110)
panel_w = cells_w + 110
panel_h = cells_h + 80
design_w = columns * panel_w + 130
design_h = rows * panel_h + 80
if (!exists("width")) width = design_w
if (!exists("height")) height = design_h
load plots_dir . "style.gp"
if (!exists("title")) title = sprintf("Recall@%d per sweep cell", k) . (model eq "" ? "" : "\n" . model)

set xrange [0.5:n_lengths + 0.5]
set yrange [n_depths + 0.5:0.5]
set xtics () scale 0 font ",9"
do for [i = 1:n_lengths] { set xtics add (word(lengths, i) i) }
set ytics () scale 0 font ",9"
do for [i = 1:n_depths] { set ytics add (word(depths, i) . "%%" i) }
set xlabel "length" font ",9" offset 0, 0.5
set ylabel "depth" font ",9" offset -0.5, 0
set cbrange [0:1]
set palette defined (0 "#440154", 0.25 "#3b528b", 0.5 "#21918c", 0.75 "#5ec962", 1 "#fde725")
set grid noxtics noytics
set border 0
unset key
unset colorbox
cell_x(s) = strcol("score") eq s ? length_index(column("length")) : NaN

set multiplot title title font ",14"
do for [p = 1:n] {
  s = word(scores, p)
  col = (p - 1) % columns
  row = (p - 1) / columns
  set lmargin at screen (col * panel_w + 90.0) / design_w
  set rmargin at screen (col * panel_w + 90.0 + cells_w) / design_w
  set tmargin at screen 1 - (80.0 + row * panel_h + 25) / design_h
  set bmargin at screen 1 - (80.0 + row * panel_h + 25 + cells_h) / design_h
  set title s font ",11" offset 0, -0.5
  if (p == n) { set colorbox user origin screen (columns * panel_w + 20.0) / design_w, 0.2 size screen 18.0 / design_w, 0.6; set cbtics 0.2 font ",9"; set cblabel sprintf("recall@%d", k) font ",10" }
  plot data using (cell_x(s)):(depth_index(column("depth"))):(0.5):(0.5):(column("recall")) \
         with boxxyerror fc palette, \
       data using (cell_x(s)):(depth_index(column("depth"))):(sprintf("%.2f", column("recall"))): \
         (column("recall") < 0.55 ? 0xffffff : 0x000000) with labels font ",8" tc rgb variable
  eval record_ranges
}
unset multiplot
