/* Running a plan's cells, any subset by any process (sweep/grid.h; the
 * folder protocol is in sweep/cell.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_parse.h"
#include "sweep/grid.h"

int sweep_selection_parse(const char *cell, const char *shard, double stale_after,
                          const SweepPlan *plan, SweepSelection *s) {
  *s = (SweepSelection){.cell = -1}; /* no shard unless --shard says so */
  s->stale_after = stale_after;
  if (cell && shard) return obc_fail(OBC_EINVAL, "give --cell or --shard, not both");
  if (cell) {
    size_t id = 0;
    int rc = obc_parse_size("--cell", cell, &id);
    if (rc) return rc;
    if (id >= plan->n_cells)
      return obc_fail(OBC_EINVAL, "--cell %zu: the plan has cells 0..%zu", id, plan->n_cells - 1);
    s->cell = (long)id;
  }
  if (shard) {
    unsigned long i = 0, n = 0;
    char extra;
    if (sscanf(shard, "%lu/%lu%c", &i, &n, &extra) != 2 || n == 0 || i >= n)
      return obc_fail(OBC_EINVAL, "--shard '%s': expected i/N with 0 <= i < N", shard);
    s->shard = i;
    s->n_shards = n;
  }
  return OBC_OK;
}

static bool selected(const SweepSelection *s, size_t id) {
  if (s->cell >= 0) return id == (size_t)s->cell;
  if (s->n_shards) return id % s->n_shards == s->shard;
  return true;
}

int sweep_pending_cells(const char *dir, const SweepPlan *plan, const SweepSelection *selection,
                        size_t *ids, size_t *n, SweepRunCounts *counts) {
  *n = 0;
  for (size_t i = 0; i < plan->n_cells; i++) {
    if (!selected(selection, i)) continue;
    counts->selected++;
    SweepCellState state;
    char detail[1024];
    int rc = sweep_cell_state(dir, &plan->cells[i], selection->stale_after, &state, detail,
                              sizeof detail);
    if (rc) return rc;
    if (state == SWEEP_CELL_DONE) {
      counts->skipped_done++;
      continue;
    }
    if (state == SWEEP_CELL_RUNNING) {
      printf("cell %zu %s: running elsewhere (%s), skipped\n", i, plan->cells[i].name, detail);
      counts->skipped_running++;
      continue;
    }
    if (state == SWEEP_CELL_CORRUPT)
      printf("cell %zu %s: damaged (%s), runs again\n", i, plan->cells[i].name, detail);
    ids[(*n)++] = i;
  }
  return 0;
}

/* Runs one cell under its lock; 1 when another process has it. */
static int run_locked(SweepCellRun run, void *context, const char *dir, const SweepPlanCell *cell,
                      double stale_after) {
  SweepCellLock *lock = NULL;
  char holder[512] = "", partial[4096] = "", detail[1024];
  int rc = sweep_cell_lock(dir, cell, stale_after, &lock, holder, sizeof holder);
  if (rc) return rc;
  if (!lock) {
    printf("cell %zu %s: taken by %s, skipped\n", cell->id, cell->name, holder);
    return 1;
  }
  SweepCellState state;
  rc = sweep_cell_state(dir, cell, stale_after, &state, detail, sizeof detail);
  if (!rc && state == SWEEP_CELL_DONE) { /* finished while we waited for the lock */
    sweep_cell_unlock(lock);
    return 1;
  }
  if (!rc) rc = sweep_cell_begin(dir, cell, partial, sizeof partial);
  if (!rc) rc = run(context, cell, partial);
  if (!rc) rc = sweep_cell_commit(dir, cell, partial);
  if (rc) {
    sweep_cell_discard(partial);
    sweep_cell_record_failure(dir, cell, obc_error_message());
  }
  sweep_cell_unlock(lock);
  return rc;
}

int sweep_run_cells(SweepCellRun run, void *context, const SweepPlan *plan, const char *dir,
                    const SweepSelection *selection, const size_t *ids, size_t n,
                    SweepRunCounts *counts) {
  int first_error = 0;
  for (size_t i = 0; i < n; i++) {
    const SweepPlanCell *cell = &plan->cells[ids[i]];
    int rc = run_locked(run, context, dir, cell, selection->stale_after);
    if (rc == 1) {
      counts->skipped_running++;
    } else if (rc == OBC_EINTERRUPTED) {
      return rc;
    } else if (rc) {
      fprintf(stderr, "obcache: error: %s\n", obc_error_message());
      obc_error_clear();
      counts->failed++;
      if (!first_error) first_error = rc;
    } else {
      counts->ran++;
    }
  }
  if (first_error)
    return obc_fail(first_error, "%zu of %zu cells failed (cells/<id>.failed has why)",
                    counts->failed, n);
  return OBC_OK;
}

void sweep_run_counts_print(const char *command, const char *dir, const char *what,
                            const SweepRunCounts *c) {
  if (!c->selected) return;
  printf(
      "%s %s: %zu %s selected: %zu ran, %zu already done, %zu taken by other processes, %zu "
      "failed\n",
      command, dir, c->selected, what, c->ran, c->skipped_done, c->skipped_running, c->failed);
}

void sweep_grid_status_free(SweepGridStatus *status) {
  free(status->states);
  free(status->details);
  memset(status, 0, sizeof *status);
}
