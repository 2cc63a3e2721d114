# eval_heatmap.gp: which tasks break first as the budget shrinks? RULER's
# score (or, for a folder without it, the accuracy) of each (task, length) (rows; all tasks pooled last) at each budget
# (columns), one small heat map per policy (per policy and protocol when the
# run has several), all on one colour scale, the value written in each cell.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data       accuracy.csv of `obcache eval`                  [accuracy.csv]
#   tasks, lengths  space-separated, one word each per row (in order)
#   budgets    space-separated budgets in column order (ascending share)
#   policies, protocols  one word each per panel ("-": no protocol)
#   value, value_label  the column drawn and its name          [accuracy]
#   several_lengths, several_protocols  1 to name them in labels and titles
#   title      replaces the whole title
# `obcache plot DIR` passes them all; by hand, e.g.:
#   gnuplot -e "data='ev/accuracy.csv'; tasks='vt all'; lengths='4096 4096'; budgets='10% 50%'; policies='tova h2o'; protocols='agnostic agnostic'; outfile='h.png'" plots/eval_heatmap.gp

fig = "eval_heatmap"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "accuracy.csv"
if (!exists("tasks")) tasks = "all"
if (!exists("lengths")) lengths = "4096"
if (!exists("budgets")) budgets = "10%"
if (!exists("policies")) policies = "oracle@T"
if (!exists("protocols")) protocols = "-"
if (!exists("value")) value = "accuracy"
if (!exists("value_label")) value_label = "accuracy"
if (!exists("several_lengths")) several_lengths = 0
if (!exists("several_protocols")) several_protocols = 0
n_rows = words(tasks)
n_budgets = words(budgets)
n = words(policies)
columns = (n <= 4 ? n : 4)
rows = int(ceil(n / (1.0 * columns)))
# The layout in design pixels (as sweep_recall.gp): room for the row labels
# left of each panel's cells, a band on top for the title, one on the right
# for the colour bar; a -e "width=...; height=..." only scales the figure.
cells_w = (56 * n_budgets > 160 ? 56 * n_budgets : 160)
cells_h = (26 * n_rows > 80 ? 26 * n_rows : 80)
label_w = 150
panel_w = cells_w + label_w + 20
panel_h = cells_h + 80
design_w = columns * panel_w + 110
design_h = rows * panel_h + 90
if (!exists("width")) width = design_w
if (!exists("height")) height = design_h
load plots_dir . "style.gp"
if (!exists("title")) title = "Which tasks break first as the budget shrinks?\n" . value_label . " per task and budget, one map per policy"

budget_index(b) = sum [i = 1:n_budgets] (word(budgets, i) eq b ? i : 0)
row_index(t, l) = sum [i = 1:n_rows] (word(tasks, i) eq t && word(lengths, i) + 0 == l ? i : 0)
in_panel(s) = strcol("policy") eq word(policies, s) && (word(protocols, s) eq "-" || strcol("protocol") eq word(protocols, s))
cell_x(s) = in_panel(s) ? budget_index(strcol("budget")) : NaN
cell_y(dummy) = row_index(strcol("task"), column("length"))

set xrange [0.5:n_budgets + 0.5]
set yrange [n_rows + 0.5:0.5]
set xtics () scale 0 font ",9"
do for [i = 1:n_budgets] { set xtics add (tic_text(word(budgets, i)) i) }
set ytics () scale 0 font ",9"
do for [i = 1:n_rows] { set ytics add (word(tasks, i) . (several_lengths ? " @" . word(lengths, i) : "") i) }
set xlabel "budget" font ",9" offset 0, 0.5
set cbrange [0:1]
set palette defined (0 "#c0392b", 0.5 "#f1c40f", 1 "#27ae60")
set grid noxtics noytics
set border 0
unset key
unset colorbox

set multiplot title title font ",14"
do for [p = 1:n] {
  col = (p - 1) % columns
  row = (p - 1) / columns
  set lmargin at screen (col * panel_w + label_w + 10.0) / design_w
  set rmargin at screen (col * panel_w + label_w + 10.0 + cells_w) / design_w
  set tmargin at screen 1 - (90.0 + row * panel_h + 25) / design_h
  set bmargin at screen 1 - (90.0 + row * panel_h + 25 + cells_h) / design_h
  set title word(policies, p) . (several_protocols && word(protocols, p) ne "-" ? " (" . word(protocols, p) . ")" : "") font ",11" offset 0, -0.5
  if (p == n) { set colorbox user origin screen (columns * panel_w + 30.0) / design_w, 0.2 size screen 18.0 / design_w, 0.6; set cbtics 0.2 font ",9"; set cblabel value_label font ",10" }
  plot data using (cell_x(p)):(cell_y(0)):(0.5):(0.5):(column(value)) with boxxyerror fc palette, \
       data using (cell_x(p)):(cell_y(0)):(sprintf("%.2f", column(value))) with labels font ",8" tc rgb "#000000"
  eval record_ranges
}
unset multiplot
