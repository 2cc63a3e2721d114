/* Gnuplot variables of the eviction figures (plots/plot_replay.h): the
 * distinct values of a CSV column in file order, and the model named by the
 * folder's JSON (its file name without folders). */
#include "plots/plot_replay.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "plots/plot_csv.h"

/* Space-separated distinct values of column `name`, first appearance order. */
static int distinct_values(const PlotTable *table, const char *name, char *out, size_t size) {
  size_t column = 0;
  int rc = plot_table_column(table, name, &column);
  if (rc) return rc;
  size_t used = 0;
  out[0] = '\0';
  for (size_t r = 0; r < table->n_rows; r++) {
    const char *v = plot_table_cell(table, r, column);
    int seen = 0;
    for (size_t q = 0; q < r && !seen; q++) seen = !strcmp(plot_table_cell(table, q, column), v);
    if (!seen && used < size)
      used += (size_t)snprintf(out + used, size - used, "%s%s", used ? " " : "", v);
  }
  return OBC_OK;
}

/* Whether scores a and b have the same cell of column `value` at every
 * (budget, protocol) either has: same rows, same text. */
static int same_curve(const PlotTable *table, const size_t *col, const char *a, const char *b) {
  size_t n_a = 0, n_b = 0;
  for (size_t r = 0; r < table->n_rows; r++) {
    if (!strcmp(plot_table_cell(table, r, col[0]), b)) n_b++;
    if (strcmp(plot_table_cell(table, r, col[0]), a)) continue;
    n_a++;
    int match = 0;
    for (size_t q = 0; q < table->n_rows && !match; q++)
      match = !strcmp(plot_table_cell(table, q, col[0]), b) &&
              !strcmp(plot_table_cell(table, q, col[1]), plot_table_cell(table, r, col[1])) &&
              !strcmp(plot_table_cell(table, q, col[2]), plot_table_cell(table, r, col[2])) &&
              !strcmp(plot_table_cell(table, q, col[3]), plot_table_cell(table, r, col[3]));
    if (!match) return 0;
  }
  return n_a == n_b;
}

/* The scores of `scores` (space-separated) grouped by identical curves of
 * column `value`: groups separated by spaces, members by commas, in the
 * order of their first member. The figures draw one line per group and name
 * every member, so that coinciding policies are said to coincide instead of
 * hiding each other. */
static int coinciding_groups(const PlotTable *table, const char *scores, const char *value,
                             char *out, size_t size) {
  size_t col[4];
  int rc = plot_table_column(table, "score", &col[0]);
  if (!rc) rc = plot_table_column(table, "budget", &col[1]);
  col[2] = col[1]; /* a sweep of one protocol may have no protocol column */
  for (size_t c = 0; c < table->n_columns; c++)
    if (!strcmp(table->cells[c], "protocol")) col[2] = c;
  if (!rc) rc = plot_table_column(table, value, &col[3]);
  if (rc) return rc;
  char buf[2048], *names[128];
  size_t n = 0, used = 0;
  snprintf(buf, sizeof buf, "%s", scores);
  char *save = NULL;
  for (char *w = strtok_r(buf, " ", &save); w && n < 128; w = strtok_r(NULL, " ", &save))
    names[n++] = w;
  int grouped[128] = {0};
  out[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (grouped[i]) continue;
    if (used < size)
      used += (size_t)snprintf(out + used, size - used, "%s%s", used ? " " : "", names[i]);
    for (size_t j = i + 1; j < n; j++)
      if (!grouped[j] && same_curve(table, col, names[i], names[j])) {
        grouped[j] = 1;
        if (used < size) used += (size_t)snprintf(out + used, size - used, ",%s", names[j]);
      }
  }
  return OBC_OK;
}

/* "model" and "model_replay" of the folder's JSON; the model as a file name. */
static void json_model(const char *path, char *model, size_t size, int *with_model) {
  model[0] = '\0';
  *with_model = 1;
  FILE *fp = fopen(path, "rb");
  if (!fp) return;
  char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = '\0';
  cJSON *root = cJSON_Parse(text);
  if (!root) return;
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
  if (cJSON_IsString(m) && m->valuestring[0]) {
    const char *slash = strrchr(m->valuestring, '/');
    snprintf(model, size, "%s", slash ? slash + 1 : m->valuestring);
  }
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "model_replay");
  if (cJSON_IsBool(w)) *with_model = cJSON_IsTrue(w);
  cJSON_Delete(root);
}

int plot_replay_args(const char *dir, const char *data, PlotArgs *args) {
  char path[4096], values[2048];
  snprintf(path, sizeof path, "%s/%s", dir, data);
  PlotTable table;
  int rc = plot_table_read(path, &table);
  if (rc) return rc;
  int dynamic = !strcmp(data, "dynamic.csv"), by_budget = dynamic || !strcmp(data, "kl_steps.csv");
  rc = distinct_values(&table, "score", values, sizeof values);
  if (!rc) plot_args_string(args, "scores", values);
  char scores[2048];
  snprintf(scores, sizeof scores, "%s", values);
  if (!rc) rc = distinct_values(&table, "budget", values, sizeof values);
  if (!rc) plot_args_string(args, "budgets", values);
  /* replay_sweep.csv: the coinciding scores of each panel's column. */
  static const char *const PANELS[][2] = {{"needle_found", "found_groups"},
                                          {"needle_prefix_share", "prefix_groups"},
                                          {"needle_kept", "kept_groups"},
                                          {"kl_forced", "kl_groups"},
                                          {"rel_error", "error_groups"}};
  char groups[2048];
  for (size_t i = 0; !rc && !by_budget && i < sizeof PANELS / sizeof PANELS[0]; i++) {
    rc = coinciding_groups(&table, scores, PANELS[i][0], groups, sizeof groups);
    if (!rc) plot_args_string(args, PANELS[i][1], groups);
  }
  plot_table_free(&table);
  if (rc) return rc;
  plot_args_string(args, "data", path);
  char model[256];
  int with_model = 1;
  snprintf(path, sizeof path, "%s/%s", dir, dynamic ? "dynamic.json" : "replay_sweep.json");
  json_model(path, model, sizeof model, &with_model);
  plot_args_string(args, "model", model[0] ? model : "model");
  if (!dynamic) plot_args_size(args, "with_model", (size_t)with_model);
  return OBC_OK;
}
