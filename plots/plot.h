/* `obcache plot`: renders the figures of an analysis folder (report.json and
 * the CSVs of `obcache analyze`), a sweep folder (summary.csv), a replay
 * folder or an eval folder (accuracy.csv, plots/plot_eval.h) as PNG
 * and SVG, by running the editable gnuplot scripts of plots/ one per figure
 * and format, several at once; the files are the same for any number at once.
 * Every image is written under a temporary name and renamed only when gnuplot
 * succeeded, so a failure never leaves a picture that looks finished. */
#ifndef OBC_PLOT_H
#define OBC_PLOT_H

#include <stddef.h>

enum { PLOT_PNG = 1u << 0, PLOT_SVG = 1u << 1 };

/* One figure: its name (the output file's stem and the --only name), the
 * script that draws it, the CSV it reads and the question it answers. */
typedef struct {
  const char *name;
  const char *script;   /* file in the scripts folder */
  const char *data;     /* CSV of the analysis/sweep folder it needs */
  int sweep;            /* folder kind: 0 analysis, 1 sweep (summary.csv), 2 replay sweep
                           (replay_sweep.csv of obcache replay --sweep), 3 dynamic eviction
                           (dynamic.csv of obcache dynamic), 4 eval (accuracy.csv of
                           obcache eval) */
  const char *question; /* one sentence for --help and the README */
} PlotFigure;

/* The figures in drawing order; *count is set to their number. */
const PlotFigure *plot_figures(size_t *count);

typedef struct {
  const char *dir;         /* the analysis or sweep folder */
  const char *out_dir;     /* NULL: DIR/plots */
  unsigned formats;        /* PLOT_PNG | PLOT_SVG */
  size_t window;           /* 0: the report's main window */
  size_t k;                /* 0: the report's main budget */
  const char *only;        /* comma-separated figure names; NULL: every figure with data */
  const char *scripts_dir; /* NULL: $OBC_PLOTS_DIR, else the data folder's plots/ */
  size_t jobs;             /* gnuplot processes at once; 0: one per online processor */
} PlotOptions;

#define PLOT_MAX_WRITTEN 48
#define PLOT_MAX_SKIPPED 16

/* What a run produced: every file written (images and the small derived
 * data files), and the figures left out for lack of data (with why). */
typedef struct {
  char written[PLOT_MAX_WRITTEN][4096];
  size_t n_written;
  char skipped[PLOT_MAX_SKIPPED][512];
  size_t n_skipped;
} PlotResult;

/* Appends path to result->written (what a run lists; at most
 * PLOT_MAX_WRITTEN are kept). */
void plot_result_add(PlotResult *result, const char *path);

/* Renders the figures. Checks the folder, the scripts and gnuplot before
 * writing anything. Returns 0 or a negative OBC_E* code after obc_fail(). */
int plot_render(const PlotOptions *options, PlotResult *result);

/* Position of a score name in the order every figure lists scores (attn,
 * attn2, attn_vl1, attn_maxpool, obc_v, obc_k, obc_vk, exact_v, exact_k, exact_vk,
 * remove, oracle1, oracleT); names outside the list get a larger rank. */
int plot_score_rank(const char *name);

/* The scripts folder in effect: options->scripts_dir, $OBC_PLOTS_DIR or plots/
 * of the data folder (common/obc_paths.h: the installed share/obcache or the
 * source tree). */
const char *plot_scripts_dir(const PlotOptions *options);

#endif
