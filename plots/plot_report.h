/* What the plot command takes from an analysis folder's report.json: the
 * model's name and the analysis parameters that choose what a figure shows
 * (main window and budget, the recent window, the oracle's name). Everything
 * else in the report is left to the reader. */
#ifndef OBC_PLOT_REPORT_H
#define OBC_PLOT_REPORT_H

#include <stddef.h>

#define PLOT_MAX_VALUES 64

typedef struct {
  char path[4096];
  char model[256];                 /* trace.model, "" when absent */
  char oracle[48];                 /* parameters.oracle as oracle_steps names it: "oracle@1", ... */
  char references[160];            /* parameters.references, space-separated; "" when absent */
  size_t main_window;              /* parameters.main_window */
  size_t main_k;                   /* parameters.main_k, else 40 when in topk, else the largest k */
  size_t recent;                   /* the largest R of parameters.recent (0: none) */
  size_t windows[PLOT_MAX_VALUES]; /* (n_windows) parameters.windows */
  size_t n_windows;
  size_t topk[PLOT_MAX_VALUES]; /* (n_topk) parameters.topk */
  size_t n_topk;
} PlotReport;

/* Reads DIR/report.json of an analysis folder; fails with a one-line message
 * naming the file when it is missing, not JSON, or lacks the parameters. */
int plot_report_read(const char *dir, PlotReport *report);

/* Reads only the model's name from a JSON file (trace.model or model); leaves
 * model empty when the file or the key is absent. Used for sweep folders. */
void plot_report_model_name(const char *path, char *model, size_t size);

/* 1 when value is one of values (n). */
int plot_report_contains(const size_t *values, size_t n, size_t value);

#endif
