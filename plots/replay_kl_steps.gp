# replay_kl_steps.gp: which answer token breaks? The teacher-forced KL
# divergence KL(full || evicted) of each decode step's next-token
# distribution (every step fed the full-cache token), mean over traces, one
# panel per budget, one curve per score (log y). A needle value written one
# digit per token shows as a peak at the digit whose source tokens the
# policy dropped (docs/SCIENCE.md, "Eviction and replay").
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     kl_steps.csv of `obcache replay --sweep`            [kl_steps.csv]
#   scores   space-separated score names to draw                [every score]
#   budgets  space-separated budgets, one panel each          [every budget]
#   model    model name used in the title                           ["model"]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='t-replay-sweep/kl_steps.csv'; budgets='5% 10%'; outfile='s.png'" plots/replay_kl_steps.gp

fig = "replay_kl_steps"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "kl_steps.csv"
if (!exists("scores")) scores = "attn attn_maxpool attn_vl1 obc_v obc_k obc_vk recency random oracle@1 oracle@T decode_attn"
if (!exists("budgets")) budgets = "1% 2% 5% 10% 20% 40%"
if (!exists("model")) model = "model"
columns = (words(budgets) < 3 ? words(budgets) : 3)
rows = int((words(budgets) + columns - 1) / columns)
if (!exists("width")) width = 560 * columns
if (!exists("height")) height = 440 * rows + 130
load plots_dir . "style.gp"
if (!exists("title")) title = sprintf("Teacher-forced KL(full || evicted) by decode step\n%s", model)

floor = 1e-6
positive(v) = (v != v) ? NaN : (v > floor ? v : floor)
set datafile separator comma
set xlabel "decode step"
set ylabel "KL (nats)"
set xtics 1
# One y range for every panel, from the data, so budgets compare at a
# glance; one key, below the panels.
stats data using (positive(column("kl_forced"))) nooutput
set logscale y 10
eval log_tics_y
set yrange [STATS_min / 1.5 : STATS_max * 1.5]
set key at screen 0.5, 0.01 center bottom vertical font ",9" maxrows 2 width 2
set multiplot layout rows, columns title title font ",14" noenhanced margins 0.06, 0.98, 120.0 / height, 0.90 spacing 0.06, 0.14
do for [b in budgets] {
  set title sprintf("budget %s", b) noenhanced
  if (b ne word(budgets, 1)) { unset key }
  plot for [s in scores] data using (strcol("score") eq s && strcol("budget") eq b ? column("step") : NaN):(positive(column("kl_forced"))) \
         with linespoints lc rgb replay_colour(s) pt replay_point(s) lw replay_width(s) dt replay_dash(s) title s
  eval record_ranges
}
unset multiplot
