# eval_accuracy.gp: how close does each eviction policy stay to the full
# cache? RULER's score (mean string_match_all; over all tasks the mean of
# the task means) with its bootstrap 95% error bars, or, for a folder
# without it, task accuracy (share of samples with every answer found) with
# Wilson 95% error bars, against the budget, one panel per
# (task, length) and one for all tasks pooled, one line per policy (per
# policy and protocol when the run has several protocols); the full cache's
# value is the dashed ceiling, oracle@T the thick black line.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data       accuracy.csv of `obcache eval`                  [accuracy.csv]
#   tasks, lengths  space-separated, one word each per panel (in order)
#   value, value_low, value_high  the columns drawn  [accuracy ci_low ci_high]
#   value_label, interval_label   their names in the axis and title
#   full       the full cache's value per panel ("NaN": none)
#   budgets    space-separated budgets in axis order (ascending share)
#   policies, protocols  one word each per line ("-": no protocol)
#   several_lengths, several_protocols  1 to name them in titles and keys
#   title      replaces the whole title
# `obcache plot DIR` passes them all; by hand, e.g.:
#   gnuplot -e "data='ev/accuracy.csv'; tasks='vt all'; lengths='4096 4096'; full='0.9 0.8'; budgets='10% 50%'; policies='tova h2o'; protocols='agnostic agnostic'; outfile='a.png'" plots/eval_accuracy.gp

fig = "eval_accuracy"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "accuracy.csv"
if (!exists("tasks")) tasks = "all"
if (!exists("lengths")) lengths = "4096"
if (!exists("value")) value = "accuracy"
if (!exists("value_low")) value_low = "ci_low"
if (!exists("value_high")) value_high = "ci_high"
if (!exists("value_label")) value_label = "accuracy"
if (!exists("interval_label")) interval_label = "Wilson 95%"
if (!exists("full")) full = "NaN"
if (!exists("budgets")) budgets = "10%"
if (!exists("policies")) policies = "oracle@T"
if (!exists("protocols")) protocols = "-"
if (!exists("several_lengths")) several_lengths = 0
if (!exists("several_protocols")) several_protocols = 0
n_panels = words(tasks)
n_budgets = words(budgets)
n_series = words(policies)
# One slot more than panels: the bottom-right one, always empty, holds the key.
slots = n_panels + 1
columns = (slots <= 3 ? slots : 3)
rows = int(ceil(slots / (1.0 * columns)))
if (!exists("width")) width = 560 * columns + 40
if (!exists("height")) height = 430 * rows + 110
load plots_dir . "style.gp"
if (!exists("title")) title = "How close does each policy stay to the full cache?\n" . value_label . " against the KV-cache budget (" . interval_label . " intervals; dashed: full cache)"

budget_index(b) = sum [i = 1:n_budgets] (word(budgets, i) eq b ? i : 0)
# Points of one series sit side by side around their budget, not on top.
offset(s) = 0.5 * (s - (n_series + 1) / 2.0) / (n_series > 1 ? n_series : 1) * 0.5
row_of(p, s) = strcol("task") eq word(tasks, p) && column("length") == word(lengths, p) + 0 && \
  strcol("policy") eq word(policies, s) && (word(protocols, s) eq "-" || strcol("protocol") eq word(protocols, s))
series_title(s) = word(policies, s) . (several_protocols && word(protocols, s) ne "-" ? " (" . word(protocols, s) . ")" : "")

set xrange [0.5:n_budgets + 0.5]
set yrange [0:1.05]
set xtics () scale 0
do for [i = 1:n_budgets] { set xtics add (tic_text(word(budgets, i)) i) }
set ytics 0.1
set xlabel "budget (share of the prompt kept)"
set ylabel value_label
set style fill empty
set errorbars small

set multiplot layout rows, columns title title font ",14"
do for [p = 1:n_panels] {
  # The panel's rows of each series into $series1, $series2, ... (rows of
  # other series in between would break its line), then drawn from there.
  set datafile separator comma
  set datafile columnheaders
  do for [s = 1:n_series] {
    eval sprintf("set table $series%d", s)
    plot data using (budget_index(strcol("budget")) + offset(s)):(column(value)):(column(value_low)):(column(value_high)) with table if (row_of(p, s))
    unset table
  }
  set datafile separator whitespace
  set datafile nocolumnheaders
  set title word(tasks, p) . (word(tasks, p) eq "all" ? (value eq "score" ? " tasks (mean of the task means)" : " tasks pooled") : "") . (several_lengths ? " @ " . word(lengths, p) . " tokens" : "") font ",12"
  fv = word(full, p) + 0
  if (p == n_panels) { set key at screen 0.98, 0.04 right bottom font ",10" } else { unset key }
  plot for [s = 1:n_series] sprintf("$series%d", s) using 1:2:3:4 \
         with yerrorbars lc rgb policy_colour(word(policies, s)) pt policy_point(word(policies, s)) ps 0.8 lw 1 notitle, \
       for [s = 1:n_series] sprintf("$series%d", s) using 1:2 smooth unique \
         with linespoints lc rgb policy_colour(word(policies, s)) pt policy_point(word(policies, s)) ps 0.8 \
         lw policy_width(word(policies, s)) dt protocol_dash(word(protocols, s)) title series_title(s), \
       fv with lines dt 2 lw 2 lc rgb "#000000" title "full cache"
  eval record_ranges
}
unset multiplot
