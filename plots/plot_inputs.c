/* Gathers what the analysis figures need from an analysis folder (see
 * plot_inputs.h): the report's parameters, the score names present in the
 * CSVs, whether the chosen window and budget have rows, and the Spearman
 * values the Taylor panels print. */
#include "plots/plot_inputs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_text.h"
#include "plots/plot.h"
#include "plots/plot_csv.h"

int plot_file_exists(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return access(path, R_OK) == 0;
}

int plot_file_has_rows(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *fp = fopen(path, "r");
  if (!fp) return 0;
  int lines = 0, at_line_start = 1, c;
  while (lines < 2 && (c = fgetc(fp)) != EOF) {
    if (c == '\n')
      at_line_start = 1;
    else if (at_line_start && c != '\r') {
      lines++;
      at_line_start = 0;
    }
  }
  fclose(fp);
  return lines >= 2;
}

/* The distinct values of a text column, in figure order, space-separated. */
static int collect_names(const PlotTable *table, const char *column_name, char *out, size_t size) {
  size_t column;
  int rc = plot_table_column(table, column_name, &column);
  if (rc) return rc;
  const char *names[64];
  size_t n = 0;
  for (size_t row = 0; row < table->n_rows; row++) {
    const char *name = plot_table_cell(table, row, column);
    size_t i = 0;
    while (i < n && strcmp(names[i], name)) i++;
    if (i < n) continue;
    if (n == 64) return obc_fail(OBC_EFORMAT, "%s: more than 64 score names", table->path);
    char escaped[OBC_ESCAPED_SIZE(32)];
    if (!name[0] || strchr(name, ' ') || strchr(name, '\''))
      return obc_fail(OBC_EFORMAT, "%s: line %zu: score name '%s' is empty or has a space or quote",
                      table->path, row + 2, obc_text_escape(escaped, sizeof escaped, name, false));
    size_t at = n;
    while (at > 0 && plot_score_rank(names[at - 1]) > plot_score_rank(name)) at--;
    memmove(names + at + 1, names + at, (n - at) * sizeof *names);
    names[at] = name;
    n++;
  }
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    int w = snprintf(out + used, size - used, "%s%s", i ? " " : "", names[i]);
    if (w < 0 || (size_t)w >= size - used)
      return obc_fail(OBC_EFORMAT, "%s: too many score names", table->path);
    used += (size_t)w;
  }
  return OBC_OK;
}

/* Rows of recall.csv at (window, recent, k); counts them. */
static int count_recall_rows(const PlotTable *table, size_t window, size_t recent, size_t k,
                             size_t *count) {
  size_t cw, cr, ck;
  int rc = plot_table_column(table, "window", &cw);
  if (!rc) rc = plot_table_column(table, "recent", &cr);
  if (!rc) rc = plot_table_column(table, "k", &ck);
  if (rc) return rc;
  *count = 0;
  for (size_t row = 0; row < table->n_rows; row++) {
    double w, r, kk;
    rc = plot_table_number(table, row, cw, &w);
    if (!rc) rc = plot_table_number(table, row, cr, &r);
    if (!rc) rc = plot_table_number(table, row, ck, &kk);
    if (rc) return rc;
    if ((size_t)w == window && (size_t)r == recent && (size_t)kk == k) (*count)++;
  }
  return OBC_OK;
}

static int read_recall(const char *dir, PlotInputs *in) {
  char path[4096];
  snprintf(path, sizeof path, "%s/recall.csv", dir);
  PlotTable table;
  int rc = plot_table_read(path, &table);
  if (rc) return rc;
  rc = plot_table_require(&table, "score,window,recent,k,recall_mean,recall_min,recall_max");
  if (!rc) rc = collect_names(&table, "score", in->scores, sizeof in->scores);
  size_t count = 0;
  if (!rc) rc = count_recall_rows(&table, in->window, 0, in->k, &count);
  if (!rc && count == 0)
    rc = obc_fail(OBC_EFORMAT,
                  "%s: no rows at window %zu, recent 0, k %zu (does it belong to "
                  "this report.json?)",
                  path, in->window, in->k);
  in->recent = in->report.recent;
  if (!rc && in->recent > 0) {
    rc = count_recall_rows(&table, in->window, in->recent, in->k, &count);
    if (!rc && count == 0) in->recent = 0; /* no recent-window rows: one panel */
  }
  plot_table_free(&table);
  return rc;
}

/* Spearman of each Taylor score against its exact error, and of remove
 * against the oracle, at the main window (where taylor.csv was sampled). */
static int read_spearman(const char *dir, PlotInputs *in) {
  static const char *const pairs[4][2] = {
      {"obc_v", "exact_v"}, {"obc_k", "exact_k"}, {"obc_vk", "exact_vk"}, {"remove", NULL}};
  char path[4096];
  snprintf(path, sizeof path, "%s/spearman.csv", dir);
  PlotTable table;
  int rc = plot_table_read(path, &table);
  if (rc) return rc;
  size_t cs, cw, cref, crho;
  rc = plot_table_require(&table, "score,window,reference,rho_mean");
  if (!rc) {
    plot_table_column(&table, "score", &cs);
    plot_table_column(&table, "window", &cw);
    plot_table_column(&table, "reference", &cref);
    plot_table_column(&table, "rho_mean", &crho);
  }
  for (size_t row = 0; row < table.n_rows && !rc; row++) {
    double w, rho;
    rc = plot_table_number(&table, row, cw, &w);
    if (!rc) rc = plot_table_number(&table, row, crho, &rho);
    if (rc || (size_t)w != in->report.main_window || !isfinite(rho)) continue;
    for (size_t p = 0; p < 4; p++) {
      const char *reference = pairs[p][1] ? pairs[p][1] : in->report.oracle;
      if (!strcmp(plot_table_cell(&table, row, cs), pairs[p][0]) &&
          !strcmp(plot_table_cell(&table, row, cref), reference)) {
        in->rho[p] = rho;
        in->has_rho[p] = 1;
      }
    }
  }
  plot_table_free(&table);
  return rc;
}

/* Header checks of the files only some figures read. */
static int check_columns(const char *dir, const char *name, const char *columns, char *names,
                         size_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  PlotTable table;
  int rc = plot_table_read(path, &table);
  if (rc) return rc;
  rc = plot_table_require(&table, columns);
  if (!rc && names) rc = collect_names(&table, "score", names, size);
  plot_table_free(&table);
  return rc;
}

int plot_inputs_read(const char *dir, size_t window, size_t k, PlotInputs *in) {
  memset(in, 0, sizeof *in);
  int rc = plot_report_read(dir, &in->report);
  if (rc) return rc;
  const PlotReport *r = &in->report;
  in->window = window ? window : r->main_window;
  in->k = k ? k : r->main_k;
  if (!plot_report_contains(r->windows, r->n_windows, in->window))
    return obc_fail(OBC_EINVAL,
                    "--window %zu: not a window of the analysis (%s lists %zu "
                    "windows, from %zu to %zu)",
                    in->window, r->path, r->n_windows, r->windows[0], r->windows[r->n_windows - 1]);
  if (!plot_report_contains(r->topk, r->n_topk, in->k))
    return obc_fail(OBC_EINVAL,
                    "--k %zu: not a budget of the analysis (%s lists %zu budgets, "
                    "from %zu to %zu)",
                    in->k, r->path, r->n_topk, r->topk[0], r->topk[r->n_topk - 1]);
  size_t used = 0;
  for (size_t i = 0; i < r->n_topk; i++)
    used +=
        (size_t)snprintf(in->ks + used, sizeof in->ks - used, "%s%zu", i ? " " : "", r->topk[i]);
  used = 0;
  for (size_t i = 0; i < r->n_windows; i++)
    used += (size_t)snprintf(in->windows + used, sizeof in->windows - used, "%s%zu", i ? " " : "",
                             r->windows[i]);
  rc = read_recall(dir, in);
  if (!rc && plot_file_exists(dir, "bias.csv"))
    rc = check_columns(dir, "bias.csv",
                       "score,window,recent,k,bucket,bucket_lo,bucket_hi,selected_share,"
                       "mean_norm_score",
                       in->bias_names, sizeof in->bias_names);
  if (!rc && plot_file_exists(dir, "recall_layers.csv"))
    rc = check_columns(dir, "recall_layers.csv", "score,window,recent,k,layer,recall", NULL, 0);
  if (!rc && plot_file_exists(dir, "taylor.csv"))
    rc = check_columns(dir, "taylor.csv",
                       "exact_v,obc_v,exact_k,obc_k,exact_vk,obc_vk,remove,oracle", NULL, 0);
  if (!rc && plot_file_exists(dir, "spearman.csv")) rc = read_spearman(dir, in);
  return rc;
}
