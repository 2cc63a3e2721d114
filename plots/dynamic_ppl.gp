# dynamic_ppl.gp: decoding-time eviction over a long text (the paper's PG19
# experiment). One panel per cache budget: the perplexity of the text in
# windows of positions, teacher-forced, for each running score (attn = H2O,
# obc_v, obc_k, obc_vk; recency = sinks + recent) against the full cache
# (black, dashed). Lower is better; the gap to the full cache is what the
# policy's evictions cost.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     dynamic.csv of `obcache dynamic`                   [dynamic.csv]
#   scores   space-separated score names ("full" is drawn in every panel)
#   budgets  space-separated budgets, one panel each (0 = the full cache)
#   model    model name used in the title                           ["model"]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='dynamic-eviction/dynamic.csv'; budgets='256 512'; outfile='d.png'" plots/dynamic_ppl.gp

fig = "dynamic_ppl"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "dynamic.csv"
if (!exists("scores")) scores = "full attn obc_v obc_k obc_vk recency"
if (!exists("budgets")) budgets = "0 256 512 1024"
if (!exists("model")) model = "model"
# Panels: the budgets other than 0.
panel_budgets = ""
do for [b in budgets] { if (b ne "0") { panel_budgets = panel_budgets . " " . b } }
n_panels = words(panel_budgets)
if (n_panels < 1) { print "dynamic_ppl.gp: no budget other than 0 in the data"; exit error "no budget" }
if (!exists("width")) width = 80 + 560 * n_panels
if (!exists("height")) height = 600
load plots_dir . "style.gp"
if (!exists("title")) title = sprintf("Perplexity under decoding-time eviction\n%s", model)

set xlabel "position in the text (end of the window)"
set ylabel "perplexity of the window"
set key top right

set multiplot layout 1, n_panels title title font ",14"
do for [i = 1:n_panels] {
  budget = word(panel_budgets, i) + 0
  set title sprintf("cache budget %d tokens per KV head", budget)
  plot data using (strcol("score") eq "full" ? column("position") : NaN):"ppl_window" \
         with lines lc rgb "#000000" dt 2 lw 2.5 title "full cache", \
       for [s in scores] data using \
         ((strcol("score") eq s && s ne "full" && column("budget") == budget) ? column("position") : NaN):"ppl_window" \
         with linespoints lc rgb replay_colour(s) pt score_point(s) lw score_width(s) title (s eq "full" ? "" : s)
  eval record_ranges
}
unset multiplot
