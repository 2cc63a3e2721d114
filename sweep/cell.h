/* The cells of a sweep folder on disk, shared safely by any number of
 * processes on any number of machines (a network filesystem included): no
 * file is written by two processes, nothing is appended to a shared file,
 * and a cell appears under its final name only when complete.
 *
 *   DIR/plan.json                     the plan (sweep/plan.h)
 *   DIR/cells/<id>/                   a finished cell: trace.h5, analysis/,
 *                                     rows.csv (its summary rows), cell.json,
 *                                     and complete.json, the manifest (every
 *                                     file's size and FNV-1a 64), written last
 *   DIR/cells/<id>.lock               "host pid start" of the process running
 *                                     the cell; its mtime is a heartbeat
 *   DIR/cells/<id>.failed             the last failure's message
 *   DIR/cells/.<id>.partial.<host>.<pid>/   a cell being built; renamed to
 *                                     cells/<id> in one step when complete
 *
 * A lock is stale when its holder ran on this host and is gone, or when its
 * heartbeat is older than stale_after seconds (a holder on another host that
 * was killed or preempted). Two processes that both end up running a cell
 * (one took over a lock it judged stale) cannot corrupt it: each builds in
 * its own partial folder and only the first rename succeeds. */
#ifndef OBC_SWEEP_CELL_H
#define OBC_SWEEP_CELL_H

#include <stdbool.h>
#include <stddef.h>

#include "sweep/plan.h"

/* Seconds without a heartbeat after which another host's lock is stale
 * (--stale-after), as a number and, spelt from that number, as the text of
 * the help. */
#define SWEEP_STALE_AFTER_S 600
#define SWEEP_TEXT_OF(x) #x
#define SWEEP_TEXT(x) SWEEP_TEXT_OF(x)
#define SWEEP_STALE_AFTER_TEXT SWEEP_TEXT(SWEEP_STALE_AFTER_S)

typedef enum {
  SWEEP_CELL_MISSING = 0, /* never run, or interrupted */
  SWEEP_CELL_DONE,        /* complete and its manifest verifies */
  SWEEP_CELL_CORRUPT,     /* complete.json present, a file differs from it */
  SWEEP_CELL_FAILED,      /* the last run failed (cells/<id>.failed) */
  SWEEP_CELL_RUNNING      /* locked by a live holder */
} SweepCellState;

const char *sweep_cell_state_name(SweepCellState state);

/* The cell's state; detail (size bytes) says why (the failure message, the
 * file that differs, the lock holder). Verifies the manifest (reads every
 * file of a finished cell). */
int sweep_cell_state(const char *dir, const SweepPlanCell *cell, double stale_after,
                     SweepCellState *state, char *detail, size_t size);

/* The finished cell's folder, DIR/cells/<id>. */
void sweep_cell_path(const char *dir, const SweepPlanCell *cell, char *out, size_t size);

typedef struct SweepCellLock SweepCellLock;

/* Takes the cell's lock (breaking a stale one). *lock is NULL when a live
 * holder has it; holder then names it. While held, a thread refreshes the
 * lock's heartbeat. */
int sweep_cell_lock(const char *dir, const SweepPlanCell *cell, double stale_after,
                    SweepCellLock **lock, char *holder, size_t size);
void sweep_cell_unlock(SweepCellLock *lock);

/* Creates this process's partial folder for the cell (removing partial
 * folders that earlier holders left behind) into partial (size bytes). */
int sweep_cell_begin(const char *dir, const SweepPlanCell *cell, char *partial, size_t size);
/* Writes the manifest into partial and renames it to cells/<id> (replacing a
 * corrupt one). If another process finished first, discards partial. */
int sweep_cell_commit(const char *dir, const SweepPlanCell *cell, const char *partial);
/* Removes a partial folder and everything in it. */
void sweep_cell_discard(const char *partial);
/* Records a failure (cells/<id>.failed, replaced atomically). */
int sweep_cell_record_failure(const char *dir, const SweepPlanCell *cell, const char *message);

#endif
