/* Running a plan's cells, any subset by any process, each into its own
 * folder under its lock (the folder protocol: sweep/cell.h), and where the
 * finished ones stand: the runner under `obcache sweep` (sweep/capture_sweep.h)
 * and `obcache eval` (eval/eval.h) alike. */
#ifndef OBC_SWEEP_GRID_H
#define OBC_SWEEP_GRID_H

#include <stddef.h>

#include "sweep/cell.h"
#include "sweep/plan.h"

/* Which cells a process runs: all, one (cell >= 0), or a shard (the cells
 * with id % n_shards == shard). */
typedef struct {
  long cell;          /* -1: not one cell */
  size_t shard;       /* with n_shards > 0 */
  size_t n_shards;    /* 0: no sharding */
  double stale_after; /* seconds without a heartbeat after which a lock is stale */
} SweepSelection;

/* --cell I / --shard i/N (either may be NULL) into *selection. */
int sweep_selection_parse(const char *cell, const char *shard, double stale_after,
                          const SweepPlan *plan, SweepSelection *selection);
/* Counts of a run over a selection. */
typedef struct {
  size_t selected, skipped_done, skipped_running, ran, failed;
} SweepRunCounts;

/* The selected cells that still need running (not done, not running
 * elsewhere); *n of them in ids (room for plan->n_cells). */
int sweep_pending_cells(const char *dir, const SweepPlan *plan, const SweepSelection *selection,
                        size_t *ids, size_t *n, SweepRunCounts *counts);

/* What runs one cell into the folder out (which exists and is empty); a
 * sweep's is sweep_run_cell, an eval's its own. */
typedef int (*SweepCellRun)(void *context, const SweepPlanCell *cell, const char *out);
/* Runs the cells ids[0..n) of the plan with run (each under its lock,
 * skipping one that another process took or finished meanwhile). A failing
 * cell is recorded (cells/<id>.failed) and the others still run; returns an
 * error when any failed. */
int sweep_run_cells(SweepCellRun run, void *context, const SweepPlan *plan, const char *dir,
                    const SweepSelection *selection, const size_t *ids, size_t n,
                    SweepRunCounts *counts);

/* "sweep DIR: 6 cells selected: 4 ran, 2 already done, ..." on stdout
 * (nothing when none was selected); what names the cells ("samples"). */
void sweep_run_counts_print(const char *command, const char *dir, const char *what,
                            const SweepRunCounts *counts);
/* Where the finished cells stand, for the merge. */
typedef struct {
  SweepCellState *states; /* (n_cells) */
  char (*details)[512];   /* (n_cells) why, for the cells not done */
  size_t n_done;
} SweepGridStatus;

void sweep_grid_status_free(SweepGridStatus *status);

#endif
