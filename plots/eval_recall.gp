# eval_recall.gp: does keeping the oracle's tokens predict a correct answer?
# Accuracy of the sample rows of the non-oracle policies by quartile of their
# recall against oracle@T's kept set (1 = the quarter with the lowest
# recall), with Wilson 95% error bars, one line per budget group (all
# budgets pooled thick black, each budget from dark = small to light =
# large), the group's AUC (how well recall alone separates right answers
# from wrong ones; 0.5 = not at all) in the key.
#
# Variables (gnuplot -e "name=value; ..."), besides those of style.gp:
#   data     recall.csv of `obcache eval`                        [recall.csv]
#   groups   space-separated budget groups ("all", "10%", ...), in order
#   aucs     their AUCs, one word each ("n/a": one class empty)
#   title    replaces the whole title
# `obcache plot DIR` passes them all; by hand, e.g.:
#   gnuplot -e "data='ev/recall.csv'; groups='all 10%'; aucs='0.63 0.58'; outfile='r.png'" plots/eval_recall.gp

fig = "eval_recall"
if (!exists("plots_dir")) { plots_dir = ""; do for [i = strlen(ARG0):1:-1] { if (ARG0[i:i] eq "/") { plots_dir = ARG0[1:i]; break } } }
if (!exists("data")) data = "recall.csv"
if (!exists("groups")) groups = "all"
if (!exists("aucs")) aucs = "n/a"
if (!exists("width")) width = 1000
if (!exists("height")) height = 620
load plots_dir . "style.gp"
if (!exists("title")) title = "Does keeping the oracle's tokens predict a correct answer?\naccuracy by quartile of recall against oracle@T (Wilson 95% intervals)"

n_groups = words(groups)
n_budgets = n_groups - (strstrt(" " . groups . " ", " all ") > 0 ? 1 : 0)
# Budgets from dark (small) to light (large), in the order given.
set palette defined (0 "#08306b", 0.5 "#2171b5", 1 "#9ecae1")
unset colorbox
set cbrange [0:1]
budget_rank(g) = sum [i = 1:g] (word(groups, i) ne "all" ? 1 : 0)
shade(g) = n_budgets > 1 && budget_rank(g) > 0 ? (budget_rank(g) - 1.0) / (n_budgets - 1) : 0.5
offset(g) = 0.3 * (g - (n_groups + 1) / 2.0) / (n_groups > 1 ? n_groups : 1)
x_of(g) = strcol("budget") eq word(groups, g) ? column("quartile") + offset(g) : NaN
group_title(g) = (word(groups, g) eq "all" ? "all budgets" : word(groups, g)) . " (AUC " . word(aucs, g) . ")"

set xrange [0.5:4.5]
set yrange [0:1.05]
set xtics ("1\nlowest recall" 1, "2" 2, "3" 3, "4\nhighest recall" 4) scale 0
set ytics 0.1
set xlabel "quartile of recall against the oracle"
set ylabel "accuracy"
set errorbars small
set key outside right top font ",10" title "budget group"
set title title font ",14"
is_all(g) = word(groups, g) eq "all"
plot for [g = 1:n_groups] data using (is_all(g) ? x_of(g) : NaN):"accuracy":"ci_low":"ci_high" \
       with yerrorlines lw 3.5 pt 7 ps 0.9 lc rgb "#000000" title (is_all(g) ? group_title(g) : ""), \
     for [g = 1:n_groups] data using (is_all(g) ? NaN : x_of(g)):"accuracy":"ci_low":"ci_high" \
       with yerrorlines lw 1.8 pt 7 ps 0.9 lc palette frac shade(g) title (is_all(g) ? "" : group_title(g))
eval record_ranges
