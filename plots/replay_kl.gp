# replay_kl.gp: what eviction costs the model's predictions. Left: the KL
# divergence KL(full || evicted) of each decode step's next-token
# distribution, teacher-forced (every step fed the full-cache token, so the
# two runs see the same inputs), mean over steps and traces; right: the
# offline relative error ||o' - o|| / ||o|| of the attention outputs of the
# captured decode steps, from 0. Both against the budget (% of the prompt kept
# per KV head, log axis), one line per group of policies whose values
# coincide at every budget (the key, below the panel, names them all), the y
# axis from the data.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     replay_sweep.csv of `obcache replay --sweep`   [replay_sweep.csv]
#   scores   space-separated score names to draw                [every score]
#   budgets  the budgets' labels in the data's order ("1% 2%")
#   kl_groups, error_groups  the scores of each line of the left and right
#            panels, groups separated by spaces, members by commas
#                                                     [each score on its own]
#   model    model name used in the title                           ["model"]
#   with_model  0 when the sweep ran without the model (--no-model): the
#            model panel then says so                                    [1]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='t-replay-sweep/replay_sweep.csv'; outfile='k.png'" plots/replay_kl.gp

fig = "replay_kl"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "replay_sweep.csv"
if (!exists("scores")) scores = "attn attn2 attn_vl1 attn_maxpool obc_v obc_k obc_vk exact_v exact_k exact_vk remove recency random oracle@1 oracle@T decode_attn"
if (!exists("kl_groups")) kl_groups = scores
if (!exists("error_groups")) error_groups = scores
if (!exists("budgets")) budgets = "1% 2% 5% 10% 20% 40%"
if (!exists("model")) model = "model"
if (!exists("with_model")) with_model = 1
if (!exists("width")) width = 1400
name_len = 0
do for [s in scores] { if (strlen(s) > name_len) { name_len = strlen(s) } }
if (!exists("height")) height = (name_len > 14 ? 260 : 0) + 700
load plots_dir . "style.gp"
if (!exists("title")) title = sprintf("What eviction costs against the cache budget\n%s", model)
n_budgets = words(budgets)
key_rows = (name_len > 14 ? 16 : 8)
# The panels stand above their keys (in pixels: the same for any height).
bottom = (key_rows * 16.0 + 110) / height
key_font = (name_len > 14 ? ",8" : ",9")

# Zero (nothing lost) cannot sit on a log axis: drawn at the floor instead.
floor = 1e-6
positive(v) = (v != v) ? NaN : (v > floor ? v : floor)
set xlabel "budget (% of the prompt kept per KV head)"
set key noautotitle

set multiplot title title font ",14" noenhanced
set tmargin at screen 0.86
set bmargin at screen bottom
set lmargin at screen 0.07
set rmargin at screen 0.47
set key at screen 0.07, bottom - 0.10 left top Left reverse font key_font maxrows key_rows
set title "KL(full || evicted) per decode step, teacher-forced (model replay)" noenhanced
set ylabel "mean KL (nats)" noenhanced
if (with_model) {
  eval budget_axis
  stats data using (positive(column("kl_forced"))) nooutput
  set logscale y 10
  eval log_tics_y
  set yrange [STATS_min / 1.5 : STATS_max * 1.5]
  plot for [g in kl_groups] data using (in_same(strcol("score"), g) && strcol("score") eq same_first(g) ? 100 * column("fraction") : NaN):(positive(column("kl_forced"))) \
         with linespoints lc rgb replay_colour(same_first(g)) pt replay_point(same_first(g)) lw replay_width(same_first(g)) dt replay_dash(same_first(g)) title same_title(g)
  eval record_ranges
  unset logscale y
  set format y "% h"
} else {
  eval no_model_panel
}
set lmargin at screen 0.57
set rmargin at screen 0.97
set key at screen 0.57, bottom - 0.10 left top Left reverse font key_font maxrows key_rows
set xlabel "budget (% of the prompt kept per KV head)"
set title "relative attention-output error of the decode steps (offline)" noenhanced
set ylabel "||o' - o|| / ||o||" noenhanced
eval budget_axis
stats data using "rel_error" nooutput
set yrange [0 : 1.06 * STATS_max]
plot for [g in error_groups] data using (in_same(strcol("score"), g) && strcol("score") eq same_first(g) ? 100 * column("fraction") : NaN):"rel_error" \
       with linespoints lc rgb replay_colour(same_first(g)) pt replay_point(same_first(g)) lw replay_width(same_first(g)) dt replay_dash(same_first(g)) title same_title(g)
eval record_ranges
unset multiplot
