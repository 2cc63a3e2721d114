/* Running a plan's cells (any subset, by any process) and merging the
 * finished ones into DIR/summary.csv and DIR/index.html (sweep/capture_sweep.h;
 * the folder protocol is in sweep/cell.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_html.h"
#include "common/obc_parse.h"
#include "formats/json_file.h"
#include "sweep/capture_sweep.h"
#include "sweep/cell.h"

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

/* --- merging ------------------------------------------------------------ */

/* Appends the file's bytes to out. */
static int append_file(const char *path, FILE *out) {
  FILE *in = fopen(path, "rb");
  if (!in) return obc_fail(OBC_EIO, "%s: cannot open", path);
  char buffer[65536];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, in)) > 0) fwrite(buffer, 1, n, out);
  int failed = ferror(in);
  fclose(in);
  return failed ? obc_fail(OBC_EIO, "%s: read error", path) : 0;
}

/* The recall of score in a cell's rows.csv (column 8 of the row whose
 * column 6 is score), or -1. */
static double cell_recall(const char *rows_path, const char *score) {
  FILE *in = fopen(rows_path, "r");
  double recall = -1;
  char line[1024];
  while (in && fgets(line, sizeof line, in)) {
    char *field[9] = {0}, *save = NULL;
    size_t n = 0;
    for (char *f = strtok_r(line, ",\n", &save); f && n < 9; f = strtok_r(NULL, ",\n", &save))
      field[n++] = f;
    if (n == 9 && !strcmp(field[5], score)) recall = atof(field[7]);
  }
  if (in) fclose(in);
  return recall;
}

static void index_row(FILE *out, const char *dir, const SweepPlanCell *cell, SweepCellState state,
                      const char *detail) {
  fprintf(out, "<tr><td>%zu</td><td>%zu</td><td>%zu</td>", cell->id, cell->length, cell->depth);
  if (state != SWEEP_CELL_DONE) {
    fprintf(out, "<td colspan=\"7\" class=\"missing\">%s", sweep_cell_state_name(state));
    if (*detail) fputs(": ", out), obc_html_text(out, detail);
    fputs("</td></tr>\n", out);
    return;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/cells/%zu/cell.json", dir, cell->id);
  cJSON *root = NULL;
  if (json_file_read(path, &root)) obc_error_clear();
  const cJSON *needle = cJSON_GetObjectItemCaseSensitive(root, "needle");
  const cJSON *answer = cJSON_GetObjectItemCaseSensitive(root, "answer");
  const cJSON *found = cJSON_GetObjectItemCaseSensitive(root, "found");
  fputs("<td>", out);
  obc_html_text(out, cJSON_IsString(needle) ? needle->valuestring : "?");
  fputs("</td><td>", out);
  obc_html_text(out, cJSON_IsString(answer) ? answer->valuestring : "?");
  fprintf(out, "</td><td>%s</td>", cJSON_IsTrue(found) ? "yes" : "no");
  cJSON_Delete(root);
  snprintf(path, sizeof path, "%s/cells/%zu/rows.csv", dir, cell->id);
  static const char *const scores[] = {"attn", "obc_vk", "remove"};
  for (size_t i = 0; i < 3; i++) fprintf(out, "<td>%.3f</td>", cell_recall(path, scores[i]));
  fprintf(out, "<td><a href=\"cells/%zu/analysis/\">analysis</a></td></tr>\n", cell->id);
}

static void index_head(FILE *out, const SweepPlan *plan, size_t n_done, const char *const *figures,
                       size_t n_figures) {
  const char *name = strrchr(plan->model_path, '/');
  fputs("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>obcache sweep: ", out);
  obc_html_text(out, name ? name + 1 : plan->model_path);
  fputs(
      "</title>\n<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
      "td,th{padding:2px 8px;text-align:right}td.missing{color:#b00;text-align:left}"
      "img{max-width:100%}</style></head><body>\n<h1>Needle-in-a-Haystack sweep</h1>\n<p>",
      out);
  fprintf(out, "%zu of %zu cells finished. Model <code>", n_done, plan->n_cells);
  obc_html_text(out, plan->model_path);
  fprintf(out, "</code> (%llu bytes, FNV-1a 64 %016llx); haystack <code>",
          (unsigned long long)plan->model_bytes, (unsigned long long)plan->model_hash);
  obc_html_text(out, plan->haystack);
  fputs("</code>; options <code>", out);
  for (size_t i = 0; i < plan->n_options; i++) {
    if (i) fputc(' ', out);
    obc_html_text(out, plan->options[i]);
  }
  fputs("</code>.</p>\n", out);
  for (size_t i = 0; i < n_figures; i++) {
    fputs("<p><img src=\"", out);
    obc_html_text(out, figures[i]);
    fputs("\"></p>\n", out);
  }
  fputs(
      "<table>\n<tr><th>cell</th><th>length</th><th>depth</th><th>needle</th><th>answer</th>"
      "<th>found</th><th>recall attn</th><th>recall obc_vk</th><th>recall remove</th><th></th>"
      "</tr>\n",
      out);
}

int sweep_merge_summary(const char *dir, const SweepPlan *plan, double stale_after,
                        SweepGridStatus *status) {
  memset(status, 0, sizeof *status);
  status->states = obc_calloc(plan->n_cells, sizeof *status->states, "cell states");
  status->details = obc_calloc(plan->n_cells, sizeof *status->details, "cell states");
  if (!status->states || !status->details) return OBC_ENOMEM;
  for (size_t i = 0; i < plan->n_cells; i++) {
    int rc = sweep_cell_state(dir, &plan->cells[i], stale_after, &status->states[i],
                              status->details[i], sizeof status->details[i]);
    if (rc) return rc;
    status->n_done += status->states[i] == SWEEP_CELL_DONE;
  }
  ObcPendingFile pending;
  FILE *summary = NULL;
  int rc = obc_text_open_in(&pending, dir, "summary.csv", &summary);
  if (rc) return rc;
  fprintf(summary, "%s\n", SWEEP_SUMMARY_HEADER);
  for (size_t i = 0; !rc && i < plan->n_cells; i++) {
    char rows[4096];
    snprintf(rows, sizeof rows, "%s/cells/%zu/rows.csv", dir, i);
    if (status->states[i] == SWEEP_CELL_DONE) rc = append_file(rows, summary);
  }
  int rc_close = obc_text_close(&pending, summary, !rc);
  return rc ? rc : rc_close;
}

int sweep_merge_index(const char *dir, const SweepPlan *plan, const SweepGridStatus *status,
                      const char *const *figures, size_t n_figures) {
  ObcPendingFile pending;
  FILE *index = NULL;
  int rc = obc_text_open_in(&pending, dir, "index.html", &index);
  if (rc) return rc;
  index_head(index, plan, status->n_done, figures, n_figures);
  for (size_t i = 0; i < plan->n_cells; i++)
    index_row(index, dir, &plan->cells[i], status->states[i], status->details[i]);
  fputs("</table>\n</body></html>\n", index);
  rc = obc_text_close(&pending, index, 1);
  if (rc) return rc;
  for (size_t i = 0; i < plan->n_cells; i++)
    if (status->states[i] != SWEEP_CELL_DONE)
      printf("cell %zu %s: %s%s%s\n", i, plan->cells[i].name,
             sweep_cell_state_name(status->states[i]), *status->details[i] ? ": " : "",
             status->details[i]);
  if (status->n_done < plan->n_cells)
    return obc_fail(OBC_EINVAL,
                    "%s: %zu of %zu cells are not finished (listed above); summary.csv holds "
                    "the %zu finished ones",
                    dir, plan->n_cells - status->n_done, plan->n_cells, status->n_done);
  return OBC_OK;
}

void sweep_grid_status_free(SweepGridStatus *status) {
  free(status->states);
  free(status->details);
  memset(status, 0, sizeof *status);
}
