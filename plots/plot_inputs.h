/* What the analysis figures need to know from an analysis folder, gathered
 * before anything is drawn: the report's parameters (plot_report.h), the
 * window and budget the figures show, the score names present in the CSVs
 * (in figure order) and the Spearman values of the Taylor panels. Reading
 * it checks the CSV headers, so a wrong folder fails with one line. */
#ifndef OBC_PLOT_INPUTS_H
#define OBC_PLOT_INPUTS_H

#include <stddef.h>

#include "plots/plot_report.h"

typedef struct {
  PlotReport report;
  size_t window;        /* the window the figures show */
  size_t k;             /* the budget the figures show */
  size_t recent;        /* R of the right-hand panels (0: no such rows in recall.csv) */
  char scores[512];     /* score names in recall.csv, figure order, space-separated */
  char bias_names[512]; /* names in bias.csv (the scores and the oracle) */
  char ks[512];         /* the report's budgets, space-separated */
  char windows[512];    /* the report's windows, space-separated */
  double rho[4];        /* Spearman of obc_v, obc_k, obc_vk, remove vs. their reference */
  int has_rho[4];
} PlotInputs;

/* Reads DIR/report.json, recall.csv (required) and the headers of bias.csv,
 * recall_layers.csv, taylor.csv and spearman.csv when present. window or k
 * 0: the report's main ones; others must be among the report's. */
int plot_inputs_read(const char *dir, size_t window, size_t k, PlotInputs *in);

/* 1 when DIR/name is readable. */
int plot_file_exists(const char *dir, const char *name);
/* 1 when DIR/name has a data line after its header (a file written with no
 * rows, e.g. taylor.csv with --taylor-points 0, has nothing to draw). */
int plot_file_has_rows(const char *dir, const char *name);

#endif
