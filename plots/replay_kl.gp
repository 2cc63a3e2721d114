# replay_kl.gp: what eviction costs the model's predictions. Left: the KL
# divergence KL(full || evicted) of each decode step's next-token
# distribution, teacher-forced (every step fed the full-cache token, so the
# two runs see the same inputs), mean over steps and traces; right: the
# offline relative error ||o' - o|| / ||o|| of the attention outputs of the
# captured decode steps. Both against the budget (% of the prompt kept per KV
# head), log-log, one curve per score.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     replay_sweep.csv of `obcache replay --sweep`   [replay_sweep.csv]
#   scores   space-separated score names to draw                [every score]
#   model    model name used in the title                           ["model"]
#   with_model  0 when the sweep ran without the model (--no-model): the
#            model panel then says so                                    [1]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='t-replay-sweep/replay_sweep.csv'; outfile='k.png'" plots/replay_kl.gp

fig = "replay_kl"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "replay_sweep.csv"
if (!exists("scores")) scores = "attn attn2 vatp snapkv obc_v obc_k obc_vk exact_v exact_k exact_vk remove streaming random oracle@1 oracle@T decode_attn"
if (!exists("model")) model = "model"
if (!exists("with_model")) with_model = 1
if (!exists("width")) width = 1400
if (!exists("height")) height = 620
load plots_dir . "style.gp"
# The policies that are not analyser scores get their own colours here.
replay_colour(s) = s eq "streaming" ? "#bcbd22" : (s eq "random" ? "#aaaaaa" : (s eq "decode_attn" ? "#8c564b" : (s eq "oracle@T" ? "#555555" : score_colour(s))))
if (!exists("title")) title = sprintf("What eviction costs against the cache budget\n%s", model)

# Zero (nothing lost) cannot sit on a log axis: drawn at the floor instead.
floor = 1e-6
positive(v) = (v != v) ? NaN : (v > floor ? v : floor)
set logscale xy 10
set xlabel "budget (% of the prompt kept per KV head)"
set key top right
set format y "%.0e"

set multiplot layout 1, 2 title title font ",14"
set title "KL(full || evicted) per decode step, teacher-forced (model replay)"
set ylabel "mean KL (nats)"
if (with_model) {
  plot for [s in scores] data using (strcol("score") eq s ? 100 * column("fraction") : NaN):(positive(column("kl_forced"))) \
         with linespoints lc rgb replay_colour(s) pt score_point(s) lw score_width(s) title s
} else {
  set label 1 "no model replay in this sweep (--no-model)" at graph 0.5, 0.5 center
  unset logscale
  set xrange [0:1]
  set yrange [0:1]
  unset tics
  unset xlabel
  unset ylabel
  plot -1 notitle
  unset label 1
  set tics
  set xrange [*:*]
  set yrange [*:*]
  set xlabel "budget (% of the prompt kept per KV head)"
  set logscale xy 10
}
set title "relative attention-output error of the decode steps (offline)"
set ylabel "||o' - o|| / ||o||"
plot for [s in scores] data using (strcol("score") eq s ? 100 * column("fraction") : NaN):(positive(column("rel_error"))) \
       with linespoints lc rgb replay_colour(s) pt score_point(s) lw score_width(s) title s
unset multiplot
