# style.gp: the look shared by every obcache figure. It defines one colour,
# point type and line width per score (the same in every figure, so "obc_vk"
# is always purple), opens the output terminal and sets fonts and the CSV
# separator. Every figure script sets its defaults, then loads this file.
#
# Variables read (pass with gnuplot -e "name=value; ..."):
#   fmt      "png" (pngcairo when this gnuplot has it, else png) or "svg"  [png]
#   outfile  the image to write                                  [<fig>.<fmt>]
#   width, height  image size in pixels (points for SVG)        [per figure]
#   fig      the figure's name (each script sets it)

if (!exists("fmt")) fmt = "png"
if (!exists("outfile")) outfile = fig . "." . fmt
if (!exists("width")) width = 1000
if (!exists("height")) height = 600

# --- output terminal -------------------------------------------------------
if (fmt eq "svg") {
  set terminal svg size width, height dynamic noenhanced font "DejaVu Sans,12" background "#ffffff"
} else {
  if (fmt ne "png") { print "style.gp: fmt must be png or svg, got '" . fmt . "'"; exit error "bad fmt" }
  if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size width, height noenhanced font "DejaVu Sans,11" background "#ffffff"
  } else {
    set terminal png size width, height noenhanced font "DejaVu Sans,11" background "#ffffff"
  }
}
set output outfile

# --- data ------------------------------------------------------------------
# The analysis CSVs: one header line, comma-separated, columns used by name.
set datafile separator comma
set datafile columnheaders

# --- one colour per score --------------------------------------------------
# Attention-only scores in blues/greens, OBCache's closed forms in warm
# colours, their exact errors in muted versions of the same, the removal
# error grey and the oracle black.
score_colour(s) = \
  s eq "attn"     ? "#1f77b4" : \
  s eq "attn2"    ? "#6baed6" : \
  s eq "attn_maxpool" ? "#17becf" : \
  s eq "attn_vl1" ? "#2ca02c" : \
  s eq "obc_v"    ? "#ff7f0e" : \
  s eq "obc_k"    ? "#d62728" : \
  s eq "obc_vk"   ? "#9467bd" : \
  s eq "exact_v"  ? "#b8860b" : \
  s eq "exact_k"  ? "#e377c2" : \
  s eq "exact_vk" ? "#8c564b" : \
  s eq "remove"   ? "#7f7f7f" : \
  s[1:6] eq "oracle" ? "#000000" : "#444444"

score_point(s) = \
  s eq "attn"     ? 5  : \
  s eq "attn2"    ? 4  : \
  s eq "attn_maxpool" ? 9  : \
  s eq "attn_vl1" ? 8  : \
  s eq "obc_v"    ? 7  : \
  s eq "obc_k"    ? 13 : \
  s eq "obc_vk"   ? 11 : \
  s eq "exact_v"  ? 6  : \
  s eq "exact_k"  ? 12 : \
  s eq "exact_vk" ? 10 : \
  s eq "remove"   ? 3  : \
  s[1:6] eq "oracle" ? 1 : 2

score_width(s) = s[1:6] eq "oracle" ? 3.5 : (s eq "obc_vk" || s eq "remove" ? 2.5 : 1.8)

# --- common look -------------------------------------------------------------
set grid back lt 1 lc rgb "#e6e6e6" lw 1
set border 3 lw 1.2
set tics nomirror out
set key noautotitle Left reverse box lc rgb "#bbbbbb" opaque samplen 2.5 spacing 1.1
set style fill solid 1.0 noborder

# --- one colour per eval policy ----------------------------------------------
# A policy of `obcache eval` ("snapkv", "tova+obc_vk", "oracle@T") takes
# the colour of the score it adds ("+obc_vk": obc_vk's purple), else of its
# base method (snapkv: attn_maxpool's, vatp: attn_vl1's; TOVA and tova-group
# rank by the last query's
# attention: attn's; h2o and observed-attention by the attention of every
# row: attn2's; the value-aware AdaKV baselines: adakv-vatp attn_vl1's,
# criticalkv-* an olive of their own), and the point type of its base method
# (its own for tova-group and observed-attention), so a method and its
# "+obc" twin share their points and differ in colour. The protocol sets the
# dash (agnostic solid).
policy_rest(p) = p[1:7] eq "preset:" ? p[8:*] : p
policy_plus(p) = strstrt(policy_rest(p), "+")
policy_base(p) = policy_plus(p) > 0 ? substr(policy_rest(p), 1, policy_plus(p) - 1) : policy_rest(p)
policy_added(p) = policy_plus(p) > 0 ? substr(policy_rest(p), policy_plus(p) + 1, strlen(policy_rest(p))) : ""
base_colour(b) = b eq "tova" || b eq "tova-group" ? score_colour("attn") : \
  b eq "h2o" || b eq "observed-attention" ? score_colour("attn2") : \
  b eq "adakv-vatp" || b eq "vatp" ? score_colour("attn_vl1") : b[1:10] eq "criticalkv" ? "#6b8e23" : \
  b eq "snapkv" ? score_colour("attn_maxpool") : \
  b eq "recency" || b eq "streaming" ? "#bcbd22" : b eq "random" ? "#aaaaaa" : score_colour(b)
base_point(b) = b eq "tova" ? score_point("attn") : b eq "tova-group" ? 15 : \
  b eq "h2o" ? score_point("attn2") : b eq "observed-attention" ? 14 : \
  b eq "adakv-vatp" || b eq "vatp" ? score_point("attn_vl1") : b[1:10] eq "criticalkv" ? 16 : \
  b eq "snapkv" ? score_point("attn_maxpool") : score_point(b)
policy_colour(p) = p[1:6] eq "oracle" ? "#000000" : (policy_added(p) ne "" ? score_colour(policy_added(p)) : base_colour(policy_base(p)))
policy_point(p) = p[1:6] eq "oracle" ? 1 : base_point(policy_base(p))
policy_width(p) = p[1:6] eq "oracle" ? 3.5 : (policy_added(p) ne "" ? 2.5 : 1.8)
protocol_dash(q) = q eq "aware" ? 2 : (q eq "agnostic-captured" ? 4 : 1)
# A tic label is a format: "10%" is written "10%%" there.
tic_text(s) = strstrt(s, "%") > 0 ? substr(s, 1, strstrt(s, "%") - 1) . "%%" . substr(s, strstrt(s, "%") + 1, strlen(s)) : s

# --- value axes --------------------------------------------------------------
# One tick style: numbers as written (0.1, 2, 40%), and on a logarithmic
# value axis spanning decades the powers of ten as 10^n ("eval log_tics_y" after
# "set logscale y"; the script's texts are then marked noenhanced).
log_tics_y = 'set termoption enhanced; set format y "10^{%T}"; set key noenhanced'
# A share axis from 0 (the reference that matters) to just above the largest
# value v: [0 : share_top(v)].
share_top(v) = (v != v || v <= 0) ? 1.0 : (v > 0.9 ? 1.02 : 1.06 * v)

# --- the ranges gnuplot drew -----------------------------------------------
# With ranges_out set (obcache plot does so under OBC_PLOT_RANGES), every
# script runs "eval record_ranges" after each panel's plot: one line per panel,
# "figure panel x_min x_max y_min y_max cb_min cb_max", the axis ranges
# gnuplot really used (the colour range matters to the heat maps only).
panel_no = 0
if (exists("ranges_out")) {
  set print ranges_out
  print "# figure panel x_min x_max y_min y_max cb_min cb_max"
  unset print
}
record_ranges = 'panel_no = panel_no + 1; if (exists("ranges_out")) { set print ranges_out append; print sprintf("%s %d %.9g %.9g %.9g %.9g %.9g %.9g", fig, panel_no, GPVAL_X_MIN, GPVAL_X_MAX, GPVAL_Y_MIN, GPVAL_Y_MAX, GPVAL_CB_MIN, GPVAL_CB_MAX); unset print }'

# --- the replay figures ------------------------------------------------------
# The policies that are not analyser scores get their own colours here. A
# paired sweep (--pairs) names its rows POLICY:PROTOCOL ("tova+obc_vk:aware"):
# the policy's colour, point and width, the protocol's dash.
last_colon(s, i) = i < 1 ? 0 : (s[i:i] eq ":" ? i : last_colon(s, i - 1))
replay_colon(s) = last_colon(s, strlen(s))
replay_policy(s) = s[1:replay_colon(s) - 1]
replay_colour(s) = replay_colon(s) > 0 ? policy_colour(replay_policy(s)) : \
  s eq "recency" ? "#bcbd22" : (s eq "random" ? "#aaaaaa" : (s eq "decode_attn" ? "#8c564b" : (s eq "oracle@T" ? "#555555" : score_colour(s))))
replay_point(s) = replay_colon(s) > 0 ? policy_point(replay_policy(s)) : score_point(s)
replay_width(s) = replay_colon(s) > 0 ? policy_width(replay_policy(s)) : score_width(s)
replay_dash(s) = replay_colon(s) > 0 ? protocol_dash(s[replay_colon(s) + 1:*]) : 1
# A group of coinciding policies, "attn,attn_vl1,obc_k": drawn once, in the style
# of its first member, named in full in the key.
same_first(g) = strstrt(g, ",") > 0 ? g[1:strstrt(g, ",") - 1] : g
same_names(g) = strstrt(g, ",") > 0 ? g[1:strstrt(g, ",") - 1] . ", " . same_names(g[strstrt(g, ",") + 1:*]) : g
same_title(g) = strstrt(g, ",") > 0 ? same_names(g) . ": identical" : g
in_same(s, g) = strstrt("," . g . ",", "," . s . ",") > 0
# The budget axis of a replay sweep (data, budgets and n_budgets set): log,
# from just below the smallest budget to just above the largest, one tic per
# budget labelled as the data writes it ("10%").
budget_axis = 'set autoscale xy; unset logscale x; set xtics (); do for [i = 1:n_budgets] { stats data using (strcol("budget") eq word(budgets, i) ? 100 * column("fraction") : NaN) nooutput; set xtics add (tic_text(word(budgets, i)) STATS_min) }; stats data using (100 * column("fraction")) nooutput; set logscale x 10; set xrange [STATS_min / 1.25 : STATS_max * 1.25]; set mxtics default'
# A panel of a sweep run without the model (--no-model) that says so.
no_model_panel = 'set label 1 "no model replay in this sweep (--no-model)" at graph 0.5, 0.5 center; unset logscale; set xrange [0:1]; set yrange [0:1]; unset xtics; unset ytics; unset border; unset key; unset xlabel; unset ylabel; plot -1 notitle; unset label 1; set xtics nomirror out; set ytics nomirror out; set border 3; set key'
