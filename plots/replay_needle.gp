# replay_needle.gp: does the model still find the needle after eviction?
# Left: a table, one row per policy and one column per budget, of the share
# of traces whose answer, decoded by the model over the evicted cache, still
# contains the needle's value (RULER string match; with one trace "found" or
# "missed"), red (none) to green (all);
# middle: the share of the value's characters the answer reproduces from its
# start (needle_prefix_share: 5 of 7 digits = 0.71); right: the share of the
# needle span's tokens the policy kept (mean over heads and traces). Both
# against the budget (% of the prompt kept per KV head, log axis), one line
# per group of policies whose values coincide at every budget (the key names
# them all: "attn, attn_vl1: identical"), the y axis up to the largest value; the oracles (oracle@1, oracle@T) and decode_attn, which see the
# captured answer's queries, are references (not bounds), recency (sinks +
# recent) and random the floor.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     replay_sweep.csv of `obcache replay --sweep`   [replay_sweep.csv]
#   scores   space-separated score names to draw                [every score]
#   budgets  the budgets' labels in the data's order ("1% 2%"; from the data)
#   prefix_groups, kept_groups  the scores of each line of the middle and
#            right panels, groups separated by spaces, members by commas
#            ("attn,attn_vl1 attn_maxpool"; obcache plot finds the coinciding scores)
#                                                     [each score on its own]
#   model    model name used in the title                           ["model"]
#   with_model  0 when the sweep ran without the model (--no-model): the
#            model panel then says so                                    [1]
#   title    replaces the whole title
# Re-render by hand, e.g.:
#   gnuplot -e "data='t-replay-sweep/replay_sweep.csv'; outfile='n.png'" plots/replay_needle.gp

fig = "replay_needle"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "replay_sweep.csv"
if (!exists("scores")) scores = "attn attn2 attn_vl1 attn_maxpool obc_v obc_k obc_vk exact_v exact_k exact_vk remove recency random oracle@1 oracle@T decode_attn"
if (!exists("prefix_groups")) prefix_groups = scores
if (!exists("kept_groups")) kept_groups = scores
if (!exists("model")) model = "model"
if (!exists("with_model")) with_model = 1
if (!exists("width")) width = 1800
name_len = 0
do for [s in scores] { if (strlen(s) > name_len) { name_len = strlen(s) } }
if (!exists("height")) height = (name_len > 14 ? 260 : 0) + 760
load plots_dir . "style.gp"
if (!exists("budgets")) { budgets = ""; stats data using (strcol("budget") ne "" && strstrt(" " . budgets . " ", " " . strcol("budget") . " ") == 0 ? (budgets = budgets . (budgets eq "" ? "" : " ") . strcol("budget"), 1) : 0) nooutput }
if (!exists("title")) title = sprintf("Needle retrieval against the cache budget\n%s", model)
n_scores = words(scores)
n_budgets = words(budgets)
budget_index(b) = sum [i = 1:n_budgets] (word(budgets, i) eq b ? i : 0)
score_index(s) = sum [i = 1:n_scores] (word(scores, i) eq s ? i : 0)

# The table's row labels need room for the longest policy name; the two
# panels of lines share the rest. Long names: one column of key entries.
left_1 = (name_len * 8.5 + 20) / width
right_1 = left_1 + 0.19
left_2 = right_1 + 0.075
right_2 = left_2 + (0.97 - left_2 - 0.075) / 2
left_3 = right_2 + 0.075
key_rows = (name_len > 14 ? 16 : 8)
# The panels stand above their keys (in pixels: the same for any height).
bottom = (key_rows * 16.0 + 110) / height
key_font = (name_len > 14 ? ",8" : ",9")

set multiplot title title font ",14"
set tmargin at screen 0.86
# --- left: the table of found / missed -----------------------------------------
set lmargin at screen left_1
set rmargin at screen right_1
set bmargin at screen 0.10
set title "answer still contains the needle's value\n(model replay; share of traces)"
if (with_model) {
  set xrange [0.5:n_budgets + 0.5]
  set yrange [n_scores + 0.5:0.5]
  set xtics () scale 0
  do for [i = 1:n_budgets] { set xtics add (tic_text(word(budgets, i)) i) }
  set ytics () scale 0
  do for [i = 1:n_scores] { set ytics add (word(scores, i) i) }
  set xlabel "budget (% of the prompt kept per KV head)"
  set cbrange [0:1]
  set palette defined (0 "#c0392b", 0.5 "#f1c40f", 1 "#27ae60")
  unset colorbox
  set grid noxtics noytics
  set border 0
  unset key
  found_text(v, n) = n == 1 ? (v > 0.5 ? "found" : "missed") : sprintf("%.2g", v)
  plot data using (budget_index(strcol("budget"))):(score_index(strcol("score"))):(0.5):(0.5):"needle_found" \
         with boxxyerror fc palette, \
       data using (budget_index(strcol("budget"))):(score_index(strcol("score"))):(found_text(column("needle_found"), column("traces"))) \
         with labels font ",8" tc rgb "#000000"
  eval record_ranges
  set grid xtics ytics
  set border 3
} else {
  eval no_model_panel
}

# --- middle and right: one line per group of coinciding policies ----------------
set xlabel "budget (% of the prompt kept per KV head)"
set ytics auto
set key noautotitle
do for [p = 2:3] {
  column_name = (p == 2 ? "needle_prefix_share" : "needle_kept")
  groups = (p == 2 ? prefix_groups : kept_groups)
  set lmargin at screen (p == 2 ? left_2 : left_3)
  set rmargin at screen (p == 2 ? right_2 : 0.97)
  set bmargin at screen bottom
  set key at screen (p == 2 ? left_2 : left_3), bottom - 0.10 left top Left reverse font key_font maxrows key_rows
  set xlabel "budget (% of the prompt kept per KV head)"
  if (p == 2) {
    set title "correct prefix of the needle's value in the answer (model replay)"
    set ylabel "share of the value's characters"
  } else {
    set title "needle span kept by the policy (offline)"
    set ylabel "share of the needle's tokens kept"
  }
  if (p == 2 && !with_model) {
    eval no_model_panel
    continue
  }
  eval budget_axis
  stats data using column_name nooutput
  set yrange [0:share_top(STATS_max)]
  plot for [g in groups] data using (in_same(strcol("score"), g) && strcol("score") eq same_first(g) ? 100 * column("fraction") : NaN):column_name \
         with linespoints lc rgb replay_colour(same_first(g)) pt replay_point(same_first(g)) lw replay_width(same_first(g)) dt replay_dash(same_first(g)) title same_title(g)
  eval record_ranges
}
unset multiplot
