/* The figures of an eval folder (`obcache eval DIR`): accuracy.csv (task x
 * length x policy x budget x protocol, Wilson intervals), paired.csv (each
 * "+ OBCache" policy against its baseline on the same samples: difference,
 * bootstrap interval, exact McNemar p, and the same for RULER's score with a
 * sign-flip p) and recall.csv (accuracy by quartile
 * of recall against the oracle, AUC). The files are untrusted: every row is
 * checked (names, counts, shares in [0, 1], intervals around their value)
 * and the first bad one fails with one line naming the file and its line.
 * From them come the gnuplot variables of the four eval figures, the small
 * table of the forest plot (eval_paired.csv, in the output folder) and
 * index.html (the tables and the figures, beside the figures). */
#ifndef OBC_PLOT_EVAL_H
#define OBC_PLOT_EVAL_H

#include <stddef.h>

#include "plots/plot.h"
#include "plots/plot_csv.h"
#include "plots/plot_gnuplot.h"

#define PLOT_EVAL_MAX_NAMES 64 /* distinct tasks, budgets, series, panels, groups */
#define PLOT_EVAL_NAME_SIZE 64

typedef struct {
  char policy[PLOT_EVAL_NAME_SIZE];
  char protocol[PLOT_EVAL_NAME_SIZE]; /* "" for the full cache */
} PlotEvalSeries;

typedef struct {
  PlotTable accuracy; /* accuracy.csv, checked */
  PlotTable paired;   /* paired.csv, checked; n_rows 0 when absent */
  PlotTable recall;   /* recall.csv, checked; n_rows 0 when absent */
  int has_paired, has_recall;
  /* accuracy.csv has RULER's score interval (score_ci_low, score_ci_high),
   * paired.csv the score's paired test (score_difference .. sign_flip_p):
   * the figures then draw RULER's score, else the accuracy. */
  int has_score, paired_has_score;
  /* (n_panels) one accuracy panel per (task, length): lengths ascending,
   * tasks in file order with "all" last; full[] the full-cache score (with
   * has_score, else accuracy) of the panel, NaN when the file has none. */
  char panel_task[PLOT_EVAL_MAX_NAMES][PLOT_EVAL_NAME_SIZE];
  char panel_length[PLOT_EVAL_MAX_NAMES][24];
  double full[PLOT_EVAL_MAX_NAMES];
  size_t n_panels;
  char budgets[PLOT_EVAL_MAX_NAMES][24]; /* (n_budgets) ascending share */
  size_t n_budgets;
  PlotEvalSeries series[PLOT_EVAL_MAX_NAMES]; /* (n_series) policies but full, file order */
  size_t n_series;
  size_t n_protocols;                   /* distinct protocols of the series */
  char groups[PLOT_EVAL_MAX_NAMES][24]; /* (n_groups) budget groups of recall.csv */
  double group_auc[PLOT_EVAL_MAX_NAMES];
  size_t n_groups;
} PlotEval;

/* Reads and checks DIR/accuracy.csv (required) and DIR/paired.csv and
 * DIR/recall.csv (when present). */
int plot_eval_read(const char *dir, PlotEval *eval);
void plot_eval_free(PlotEval *eval);

/* The gnuplot variables of eval figure `name` (eval_accuracy, eval_heatmap,
 * eval_paired, eval_recall); eval_paired reads out_dir/eval_paired.csv. */
void plot_eval_args(const PlotEval *eval, const char *name, const char *dir, const char *out_dir,
                    PlotArgs *args);

/* Writes out_dir/eval_paired.csv, the forest plot's rows (the pooled "all"
 * rows of paired.csv when it has them, else every row): row, label,
 * difference, ci_low, ci_high, p, with RULER's score difference, its
 * interval and the sign-flip p when paired.csv has them, else the accuracy
 * difference and the McNemar p; under a temporary
 * name first, and adds it to result. */
int plot_eval_write_paired(const PlotEval *eval, const char *out_dir, PlotResult *result);

/* Writes out_dir/index.html: the folder, the accuracy and paired tables and
 * every figure of out_dir that names an eval figure. */
int plot_eval_write_index(const PlotEval *eval, const char *dir, const char *out_dir,
                          PlotResult *result);

/* `obcache eval --merge`'s figures: plot_render on an eval folder (figures
 * under options->out_dir, else DIR/plots, and index.html beside them).
 * Fails when DIR/accuracy.csv is missing. */
int plot_eval(const char *dir, const PlotOptions *options, PlotResult *result);

#endif
