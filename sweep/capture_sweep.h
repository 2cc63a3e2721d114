/* A Needle-in-a-Haystack sweep: one capture and one analysis per (length,
 * depth) cell of a grid (the plan, sweep/plan.h), each cell run by any
 * process into its own folder (sweep/cell.h), and a merge into a summary of
 * the whole grid. A cell's folder holds its trace trace.h5, its analysis
 * folder analysis/ (analyze/analysis.h) and rows.csv: one row per quantity,
 * whether the full model retrieved the needle and the quantity's recall@k
 * of the oracle at the main window (r = 0). The merge concatenates the rows
 * of the finished cells in plan order into DIR/summary.csv and writes
 * DIR/index.html. */
#ifndef OBC_SWEEP_H
#define OBC_SWEEP_H

#include <stddef.h>

#include "analyze/analysis.h"
#include "capture/capture.h"
#include "prompts/niah.h"
#include "model/model.h"
#include "sweep/grid.h"

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

#define SWEEP_SUMMARY_HEADER "length,depth,needle,found,answer_ok,score,k,recall,needle_kept"

/* Checks the grid against the model before any cell runs: depths 0..100,
 * every length + decoded tokens within the model's context. */
int sweep_check_grid(const Model *model, const SweepOptions *options);

/* Captures and analyses one cell into the folder out (which exists):
 * out/trace.h5, out/analysis/, out/rows.csv (summary rows, no header) and
 * out/cell.json (the answer and whether it holds the needle). */
int sweep_run_cell(const Model *model, const SweepOptions *options, const SweepPlanCell *cell,
                   const char *out);

/* The capture sweep's SweepCellRun; context is the SweepModelOptions. */
typedef struct {
  const Model *model;
  const SweepOptions *options;
} SweepModelOptions;
int sweep_run_cell_with(void *context, const SweepPlanCell *cell, const char *out);
/* Checks every cell (verifying the finished ones) and writes their rows, in
 * plan order, to DIR/summary.csv (under a temporary name). */
int sweep_merge_summary(const char *dir, const SweepPlan *plan, double stale_after,
                        SweepGridStatus *status);
/* Writes DIR/index.html (a table of the cells, the figures given by their
 * paths relative to DIR), lists the cells that are missing, failed, corrupt
 * or running, and returns an error naming their number when the grid is
 * incomplete. */
int sweep_merge_index(const char *dir, const SweepPlan *plan, const SweepGridStatus *status,
                      const char *const *figures, size_t n_figures);

#endif
