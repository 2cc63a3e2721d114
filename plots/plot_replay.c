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
  if (!rc && by_budget) rc = distinct_values(&table, "budget", values, sizeof values);
  if (!rc && by_budget) plot_args_string(args, "budgets", values);
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
