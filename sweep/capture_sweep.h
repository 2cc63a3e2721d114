/* A Needle-in-a-Haystack sweep: one capture and one analysis per (length,
 * depth) cell of a grid, and a summary table of the whole grid. For each cell
 * DIR holds the trace L<length>_D<depth>.h5 and its analysis folder
 * L<length>_D<depth>/ (analyze/analysis.h); DIR/summary.csv has one row per
 * cell and quantity: whether the full model retrieved the needle, and the
 * quantity's recall@k of the oracle at the main window (r = 0). */
#ifndef OBC_SWEEP_H
#define OBC_SWEEP_H

#include <stddef.h>

#include "analyze/analysis.h"
#include "capture/capture.h"
#include "capture/niah.h"
#include "model/model.h"

#define SWEEP_MAX_CELLS 64

typedef struct {
  size_t lengths[SWEEP_MAX_CELLS]; /* (n_lengths) */
  size_t n_lengths;
  size_t depths[SWEEP_MAX_CELLS]; /* (n_depths) percent */
  size_t n_depths;
  NiahOptions niah;        /* length and depth are set per cell */
  CaptureOptions capture;  /* producer is set per cell */
  AnalysisConfig analysis; /* resolved per cell against its trace */
  const char *command_line;
} SweepOptions;

/* Runs the grid into dir (created if needed). summary.csv appears at the end,
 * written under a temporary name. */
int sweep_run(const Model *model, const SweepOptions *options, const char *dir);

#endif
