# replay_needle.gp: does the model still find the needle after eviction?
# Left: the share of traces whose answer, decoded by the model over the
# evicted cache, still contains the needle's value (RULER string match);
# middle: the share of the value's characters the answer reproduces from its
# start (needle_prefix_share: 5 of 7 digits = 0.71); right: the share of the
# needle span's tokens the policy kept (mean over heads and traces). All
# against the budget (% of the prompt kept per KV head, log axis), one curve
# per score; the oracles (oracle@1, oracle@T) and decode_attn, which see the
# captured answer's queries, are references (not bounds), streaming (sinks +
# recent) and random the floor.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     replay_sweep.csv of `obcache replay --sweep`   [replay_sweep.csv]
#   scores   space-separated score names to draw                [every score]
#   model    model name used in the title                           ["model"]
#   with_model  0 when the sweep ran without the model (--no-model): the
#            model panel then says so                                    [1]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='t-replay-sweep/replay_sweep.csv'; outfile='n.png'" plots/replay_needle.gp

fig = "replay_needle"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "replay_sweep.csv"
if (!exists("scores")) scores = "attn attn2 vatp snapkv obc_v obc_k obc_vk exact_v exact_k exact_vk remove streaming random oracle@1 oracle@T decode_attn"
if (!exists("model")) model = "model"
if (!exists("with_model")) with_model = 1
if (!exists("width")) width = 1800
if (!exists("height")) height = 620
load plots_dir . "style.gp"
# The policies that are not analyser scores get their own colours here.
replay_colour(s) = s eq "streaming" ? "#bcbd22" : (s eq "random" ? "#aaaaaa" : (s eq "decode_attn" ? "#8c564b" : (s eq "oracle@T" ? "#555555" : score_colour(s))))
if (!exists("title")) title = sprintf("Needle retrieval against the cache budget\n%s", model)

set logscale x 10
set xlabel "budget (% of the prompt kept per KV head)"
set yrange [-0.02:1.02]
set ytics 0.1
# One key, in the last panel (its curves rise to the lower right): in the
# first two the retrieved curves sit at 1 on the left, under any key there.
unset key

set multiplot layout 1, 3 title title font ",14"
set title "answer still contains the needle's value (model replay)"
set ylabel "share of traces"
if (with_model) {
  plot for [s in scores] data using (strcol("score") eq s ? 100 * column("fraction") : NaN):"needle_found" \
         with linespoints lc rgb replay_colour(s) pt score_point(s) lw score_width(s) title s
  set title "correct prefix of the needle's value in the answer (model replay)"
  set ylabel "share of the value's characters"
  plot for [s in scores] data using (strcol("score") eq s ? 100 * column("fraction") : NaN):"needle_prefix_share" \
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
  plot -1 notitle
  unset label 1
  set tics
  set xrange [*:*]
  set yrange [*:*]
  set xlabel "budget (% of the prompt kept per KV head)"
  set logscale x 10
  set yrange [-0.02:1.02]
}
set title "needle span kept by the policy (offline)"
set ylabel "share of the needle's tokens kept"
set key top left
plot for [s in scores] data using (strcol("score") eq s ? 100 * column("fraction") : NaN):"needle_kept" \
       with linespoints lc rgb replay_colour(s) pt score_point(s) lw score_width(s) title s
unset multiplot
