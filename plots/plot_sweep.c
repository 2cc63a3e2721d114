/* Averages a sweep's summary.csv over the needles of each (length, depth)
 * cell and writes the two small tables the sweep heat maps draw (see
 * plot_sweep.h). A needle counts once per cell even though summary.csv
 * repeats its found/answer_ok on every score's row. */
#include "plots/plot_sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "plots/plot_csv.h"

static const char *const SUMMARY_COLUMNS = "length,depth,needle,found,answer_ok,score,k,recall";

/* Adds value to a sorted set of at most PLOT_SWEEP_MAX_AXIS values. */
static int axis_insert(double *values, size_t *n, double value, const char *path,
                       const char *what) {
  size_t at = 0;
  while (at < *n && values[at] < value) at++;
  if (at < *n && values[at] == value) return OBC_OK;
  if (*n == PLOT_SWEEP_MAX_AXIS)
    return obc_fail(OBC_EFORMAT, "%s: more than %d distinct %s values", path, PLOT_SWEEP_MAX_AXIS,
                    what);
  memmove(values + at + 1, values + at, (*n - at) * sizeof *values);
  values[at] = value;
  (*n)++;
  return OBC_OK;
}

static size_t axis_index(const double *values, size_t n, double value) {
  for (size_t i = 0; i < n; i++)
    if (values[i] == value) return i;
  return n;
}

static size_t score_index(const PlotSweep *sweep, const char *name) {
  for (size_t i = 0; i < sweep->n_scores; i++)
    if (!strcmp(sweep->scores[i], name)) return i;
  return sweep->n_scores;
}

/* Inserts a score name keeping the figures' score order. */
static int score_insert(PlotSweep *sweep, const char *name, const char *path) {
  if (score_index(sweep, name) < sweep->n_scores) return OBC_OK;
  if (sweep->n_scores == PLOT_SWEEP_MAX_SCORES || strlen(name) >= sizeof sweep->scores[0])
    return obc_fail(OBC_EFORMAT, "%s: too many or too long score names (at %s)", path, name);
  size_t at = 0;
  while (at < sweep->n_scores && plot_score_rank(sweep->scores[at]) <= plot_score_rank(name)) at++;
  memmove(sweep->scores[at + 1], sweep->scores[at],
          (sweep->n_scores - at) * sizeof sweep->scores[0]);
  snprintf(sweep->scores[at], sizeof sweep->scores[0], "%s", name);
  sweep->n_scores++;
  return OBC_OK;
}

/* The columns of summary.csv, by name. */
typedef struct {
  size_t length, depth, needle, found, answer_ok, score, k, recall;
} SummaryColumns;

static int summary_columns(const PlotTable *table, SummaryColumns *c) {
  int rc = plot_table_require(table, SUMMARY_COLUMNS);
  if (rc) return rc;
  plot_table_column(table, "length", &c->length);
  plot_table_column(table, "depth", &c->depth);
  plot_table_column(table, "needle", &c->needle);
  plot_table_column(table, "found", &c->found);
  plot_table_column(table, "answer_ok", &c->answer_ok);
  plot_table_column(table, "score", &c->score);
  plot_table_column(table, "k", &c->k);
  plot_table_column(table, "recall", &c->recall);
  return OBC_OK;
}

/* 1 when an earlier row has the same (length, depth, needle): that needle
 * was already counted for its cell. */
static int needle_seen(const PlotTable *table, const SummaryColumns *c, size_t row) {
  for (size_t r = 0; r < row; r++)
    if (!strcmp(plot_table_cell(table, r, c->length), plot_table_cell(table, row, c->length)) &&
        !strcmp(plot_table_cell(table, r, c->depth), plot_table_cell(table, row, c->depth)) &&
        !strcmp(plot_table_cell(table, r, c->needle), plot_table_cell(table, row, c->needle)))
      return 1;
  return 0;
}

/* First pass: the axes, the scores and the budget. */
static int sweep_collect_axes(const PlotTable *table, const SummaryColumns *c, size_t k,
                              PlotSweep *sweep) {
  for (size_t row = 0; row < table->n_rows; row++) {
    double length, depth, row_k;
    int rc = plot_table_number(table, row, c->length, &length);
    if (!rc) rc = plot_table_number(table, row, c->depth, &depth);
    if (!rc) rc = plot_table_number(table, row, c->k, &row_k);
    if (rc) return rc;
    if (depth < 0 || depth > 100 || length <= 0)
      return obc_fail(OBC_EFORMAT,
                      "%s: line %zu: length %g, depth %g (expected length > 0 and "
                      "depth in 0..100)",
                      table->path, row + 2, length, depth);
    if (row == 0) sweep->k = k ? k : (size_t)row_k;
    if ((size_t)row_k != sweep->k) continue;
    if (!rc) rc = axis_insert(sweep->lengths, &sweep->n_lengths, length, table->path, "length");
    if (!rc) rc = axis_insert(sweep->depths, &sweep->n_depths, depth, table->path, "depth");
    if (!rc) rc = score_insert(sweep, plot_table_cell(table, row, c->score), table->path);
    if (rc) return rc;
  }
  if (sweep->n_lengths == 0)
    return obc_fail(OBC_EFORMAT,
                    "%s: no rows with k = %zu (expected one row per cell, needle and "
                    "score)",
                    table->path, sweep->k);
  return OBC_OK;
}

/* Second pass: sums over the needles, then means. */
static int sweep_average(const PlotTable *table, const SummaryColumns *c, PlotSweep *sweep) {
  size_t cells = sweep->n_lengths * sweep->n_depths;
  size_t *recall_count = calloc(cells * sweep->n_scores, sizeof *recall_count);
  if (!recall_count) return obc_fail(OBC_ENOMEM, "%s: out of memory", table->path);
  int rc = OBC_OK;
  for (size_t row = 0; row < table->n_rows && !rc; row++) {
    double length, depth, row_k, found, answer_ok, recall;
    rc = plot_table_number(table, row, c->k, &row_k);
    if (rc || (size_t)row_k != sweep->k) continue;
    rc = plot_table_number(table, row, c->length, &length);
    if (!rc) rc = plot_table_number(table, row, c->depth, &depth);
    if (!rc) rc = plot_table_number(table, row, c->found, &found);
    if (!rc) rc = plot_table_number(table, row, c->answer_ok, &answer_ok);
    if (!rc) rc = plot_table_number(table, row, c->recall, &recall);
    if (rc) break;
    size_t cell = axis_index(sweep->lengths, sweep->n_lengths, length) * sweep->n_depths +
                  axis_index(sweep->depths, sweep->n_depths, depth);
    if (!needle_seen(table, c, row)) {
      sweep->found[cell] += found;
      sweep->answer_ok[cell] += answer_ok;
      sweep->needles[cell]++;
    }
    size_t at = cell * sweep->n_scores + score_index(sweep, plot_table_cell(table, row, c->score));
    if (!isnan(recall)) {
      sweep->recall[at] += recall;
      recall_count[at]++;
    }
  }
  for (size_t cell = 0; cell < cells; cell++) {
    size_t n = sweep->needles[cell];
    sweep->found[cell] = n ? sweep->found[cell] / (double)n : NAN;
    sweep->answer_ok[cell] = n ? sweep->answer_ok[cell] / (double)n : NAN;
    for (size_t s = 0; s < sweep->n_scores; s++) {
      size_t at = cell * sweep->n_scores + s;
      sweep->recall[at] = recall_count[at] ? sweep->recall[at] / (double)recall_count[at] : NAN;
    }
  }
  free(recall_count);
  return rc;
}

int plot_sweep_read(const char *dir, size_t k, PlotSweep *sweep) {
  memset(sweep, 0, sizeof *sweep);
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/summary.csv", dir) >= sizeof path)
    return obc_fail(OBC_EINVAL, "%s: path too long", dir);
  PlotTable table;
  int rc = plot_table_read(path, &table);
  if (rc) return rc;
  SummaryColumns c;
  rc = summary_columns(&table, &c);
  if (!rc && table.n_rows == 0) rc = obc_fail(OBC_EFORMAT, "%s: no data rows", path);
  if (!rc) rc = sweep_collect_axes(&table, &c, k, sweep);
  if (!rc) {
    size_t cells = sweep->n_lengths * sweep->n_depths;
    sweep->found = calloc(cells, sizeof *sweep->found);
    sweep->answer_ok = calloc(cells, sizeof *sweep->answer_ok);
    sweep->needles = calloc(cells, sizeof *sweep->needles);
    sweep->recall = calloc(cells * sweep->n_scores, sizeof *sweep->recall);
    if (!sweep->found || !sweep->answer_ok || !sweep->needles || !sweep->recall)
      rc = obc_fail(OBC_ENOMEM, "%s: out of memory", path);
  }
  if (!rc) rc = sweep_average(&table, &c, sweep);
  plot_table_free(&table);
  if (rc) plot_sweep_free(sweep);
  return rc;
}

void plot_sweep_free(PlotSweep *sweep) {
  free(sweep->found);
  free(sweep->answer_ok);
  free(sweep->needles);
  free(sweep->recall);
  sweep->found = sweep->answer_ok = sweep->recall = NULL;
  sweep->needles = NULL;
}

void plot_sweep_axis_text(const double *values, size_t n, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < n && used < size; i++) {
    int w = snprintf(out + used, size - used, "%s%.10g", i ? " " : "", values[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

int plot_sweep_write(const PlotSweep *sweep, const char *out_dir, PlotResult *result) {
  ObcPendingFile needle_file, recall_file;
  FILE *fp;
  int rc = obc_text_open_in(&needle_file, out_dir, "sweep_needle.csv", &fp);
  if (rc) return rc;
  fprintf(fp, "length,depth,needles,found,answer_ok\n");
  for (size_t li = 0; li < sweep->n_lengths; li++)
    for (size_t di = 0; di < sweep->n_depths; di++) {
      size_t cell = li * sweep->n_depths + di;
      if (!sweep->needles[cell]) continue;
      fprintf(fp, "%.10g,%.10g,%zu,%.9g,%.9g\n", sweep->lengths[li], sweep->depths[di],
              sweep->needles[cell], sweep->found[cell], sweep->answer_ok[cell]);
    }
  rc = obc_text_close(&needle_file, fp, 1);
  if (rc) return rc;
  plot_result_add(result, needle_file.final_path);

  rc = obc_text_open_in(&recall_file, out_dir, "sweep_recall.csv", &fp);
  if (rc) return rc;
  fprintf(fp, "length,depth,score,k,needles,recall\n");
  for (size_t li = 0; li < sweep->n_lengths; li++)
    for (size_t di = 0; di < sweep->n_depths; di++)
      for (size_t s = 0; s < sweep->n_scores; s++) {
        size_t cell = li * sweep->n_depths + di;
        double recall = sweep->recall[cell * sweep->n_scores + s];
        if (isnan(recall)) continue;
        fprintf(fp, "%.10g,%.10g,%s,%zu,%zu,%.9g\n", sweep->lengths[li], sweep->depths[di],
                sweep->scores[s], sweep->k, sweep->needles[cell], recall);
      }
  rc = obc_text_close(&recall_file, fp, 1);
  if (rc) return rc;
  plot_result_add(result, recall_file.final_path);
  return OBC_OK;
}
