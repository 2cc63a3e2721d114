/* The sweep figures' data: SWEEPDIR/summary.csv (length, depth, needle,
 * found, answer_ok, score, k, recall; one row per cell, needle and score) is
 * averaged over the needles of each (length, depth) cell into two small files
 * the heat-map scripts read: sweep_needle.csv (one row per cell) and
 * sweep_recall.csv (one row per cell and score). */
#ifndef OBC_PLOT_SWEEP_H
#define OBC_PLOT_SWEEP_H

#include <stddef.h>

#include "plots/plot.h"

#define PLOT_SWEEP_MAX_AXIS 64
#define PLOT_SWEEP_MAX_SCORES 24

typedef struct {
  double lengths[PLOT_SWEEP_MAX_AXIS]; /* (n_lengths) sorted distinct context lengths */
  size_t n_lengths;
  double depths[PLOT_SWEEP_MAX_AXIS]; /* (n_depths) sorted distinct depths (percent) */
  size_t n_depths;
  char scores[PLOT_SWEEP_MAX_SCORES][32]; /* (n_scores) in the figures' score order */
  size_t n_scores;
  size_t k;          /* the budget of the recall column */
  double *found;     /* (n_lengths, n_depths) share of needles found, NaN: no cell */
  double *answer_ok; /* (n_lengths, n_depths) share of answers judged right */
  size_t *needles;   /* (n_lengths, n_depths) needles in the cell */
  double *recall;    /* (n_lengths, n_depths, n_scores) mean over the needles, NaN: none */
} PlotSweep;

/* Reads and averages DIR/summary.csv. k = 0 takes the budget of the file's
 * first row; other budgets are then ignored. */
int plot_sweep_read(const char *dir, size_t k, PlotSweep *sweep);
void plot_sweep_free(PlotSweep *sweep);

/* Writes out_dir/sweep_needle.csv and out_dir/sweep_recall.csv (each under a
 * temporary name first), appending their paths to result. */
int plot_sweep_write(const PlotSweep *sweep, const char *out_dir, PlotResult *result);

/* "v1 v2 ..." of an axis, for the scripts' lengths/depths variables. */
void plot_sweep_axis_text(const double *values, size_t n, char *out, size_t size);

#endif
