# recall_layers.gp: per-layer recall heat map. One column per score, one row
# per layer, the colour and the printed number are recall@k (mean over the
# layer's KV heads) at one window and budget: which layers each score gets
# right and where all of them struggle.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     recall_layers.csv of an analysis folder      [recall_layers.csv]
#   window   perturbation window W                   [largest W in the data]
#   k        the budget                                                  [40]
#   recent   recent window R                                             [0]
#   scores   space-separated score names, one column each, in this order
#   model, oracle   names used in the title            ["model", "oracle@1"]
#   values   1 prints the recall in each cell, 0 does not               [1]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='out/recall_layers.csv'; window=16; k=40; outfile='l.png'" plots/recall_layers.gp

fig = "recall_layers"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "recall_layers.csv"
if (!exists("k")) k = 40
if (!exists("recent")) recent = 0
if (!exists("scores")) scores = "attn attn2 attn_vl1 attn_maxpool obc_v obc_k obc_vk exact_v exact_k exact_vk remove"
if (!exists("model")) model = "model"
if (!exists("oracle")) oracle = "oracle@1"
if (!exists("values")) values = 1
n = words(scores)
# The height follows the number of layers so that rows stay readable.
set datafile separator comma
set datafile columnheaders
stats data using "layer" nooutput
layers = int(STATS_max) + 1
if (!exists("width")) width = 160 + 78 * n + 140
if (!exists("height")) height = 170 + (layers < 12 ? 12 : layers) * 24
load plots_dir . "style.gp"
if (!exists("window")) { stats data using "window" nooutput; window = int(STATS_max) }
if (!exists("title")) title = sprintf("Recall@%d per layer\n%s, window W = %d, budget k = %d%s", k, model, window, k, (recent > 0 ? sprintf(", recent %d", recent) : ""))

# Column of a score in the figure (0 when the score is not drawn).
score_index(s) = sum [i = 1:n] (word(scores, i) eq s ? i : 0)
keep(s) = score_index(s) > 0 && column("window") == window && column("k") == k && column("recent") == recent

set title title font ",13"
set xrange [0.5:n + 0.5]
set yrange [layers - 0.5:-0.5]
set xtics () rotate by 35 right scale 0
do for [i = 1:n] { set xtics add (word(scores, i) i) }
set ytics 1 scale 0
if (layers > 32) { set ytics 2 }
set xlabel "score"
set ylabel "layer"
set cblabel sprintf("recall@%d (mean over the layer's KV heads)", k)
set cbrange [0:1]
set cbtics 0.1
# viridis-like: dark = low recall, yellow = high
set palette defined (0 "#440154", 0.25 "#3b528b", 0.5 "#21918c", 0.75 "#5ec962", 1 "#fde725")
set grid noxtics noytics
set border 0
unset key
set lmargin 8
set rmargin 14
# Rows that are not drawn get an undefined x (NaN): gnuplot skips them.
cell_x(s) = keep(s) ? score_index(s) : NaN
plot data using (cell_x(strcol("score"))):(column("layer")):(0.5):(0.5):(column("recall")) \
       with boxxyerror fc palette, \
     data using (values ? cell_x(strcol("score")) : NaN):(column("layer")):(sprintf("%.2f", column("recall"))): \
       (column("recall") < 0.55 ? 0xffffff : 0x000000) with labels font ",9" tc rgb variable
eval record_ranges
