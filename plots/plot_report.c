/* Reads the parts of report.json the figures need (see plot_report.h) with
 * cJSON, checking the schema and the parameters so that a wrong folder fails
 * with one clear line instead of an empty picture. */
#include "plots/plot_report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_json.h"
#include "common/obc_text.h"
#include "oracle/oracle_steps.h"

/* Reads a whole (small) JSON file and parses it. */
static int json_load(const char *path, cJSON **out) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return obc_fail(OBC_EIO, "%s: cannot open: %s", path, strerror(errno));
  char *text = NULL;
  size_t used = 0, capacity = 0;
  for (;;) {
    if (used + 4096 + 1 > capacity) {
      capacity = capacity ? capacity * 2 : 65536;
      char *grown = realloc(text, capacity);
      if (!grown) {
        free(text);
        fclose(fp);
        return obc_fail(OBC_ENOMEM, "%s: out of memory", path);
      }
      text = grown;
    }
    size_t got = fread(text + used, 1, 4096, fp);
    used += got;
    if (got < 4096) break;
  }
  int failed = ferror(fp);
  fclose(fp);
  if (failed) {
    free(text);
    return obc_fail(OBC_EIO, "%s: read error", path);
  }
  text[used] = '\0';
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!root) return obc_fail(OBC_EFORMAT, "%s: not valid JSON", path);
  const char *repeated = obc_json_duplicate_key(root);
  if (repeated) {
    char escaped[OBC_ESCAPED_SIZE(64)];
    int rc = obc_fail(OBC_EFORMAT, "%s: the key \"%s\" appears twice in one object", path,
                      obc_text_escape(escaped, sizeof escaped, repeated, true));
    cJSON_Delete(root);
    return rc;
  }
  *out = root;
  return OBC_OK;
}

/* A non-negative integer member of object; fails naming the key. */
static int json_size(const char *path, const cJSON *object, const char *key, size_t *out) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
  if (!cJSON_IsNumber(item) || item->valuedouble < 0)
    return obc_fail(OBC_EFORMAT, "%s: parameters.%s missing or not a non-negative number", path,
                    key);
  *out = (size_t)item->valuedouble;
  return OBC_OK;
}

/* An array of non-negative integers (at most PLOT_MAX_VALUES). */
static int json_sizes(const char *path, const cJSON *object, const char *key, size_t *values,
                      size_t *count) {
  const cJSON *array = cJSON_GetObjectItemCaseSensitive(object, key);
  if (!cJSON_IsArray(array))
    return obc_fail(OBC_EFORMAT, "%s: parameters.%s missing or not an array", path, key);
  *count = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, array) {
    if (!cJSON_IsNumber(item) || item->valuedouble < 0)
      return obc_fail(OBC_EFORMAT, "%s: parameters.%s holds a value that is not a count", path,
                      key);
    if (*count == PLOT_MAX_VALUES)
      return obc_fail(OBC_EFORMAT, "%s: parameters.%s has more than %d values", path, key,
                      PLOT_MAX_VALUES);
    values[(*count)++] = (size_t)item->valuedouble;
  }
  if (*count == 0) return obc_fail(OBC_EFORMAT, "%s: parameters.%s is empty", path, key);
  return OBC_OK;
}

int plot_report_contains(const size_t *values, size_t n, size_t value) {
  for (size_t i = 0; i < n; i++)
    if (values[i] == value) return 1;
  return 0;
}

/* The model's name: trace.model, else a top-level "model" string. */
static void model_name_of(const cJSON *root, char *model, size_t size) {
  const cJSON *trace = cJSON_GetObjectItemCaseSensitive(root, "trace");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(trace, "model");
  if (!cJSON_IsString(name)) name = cJSON_GetObjectItemCaseSensitive(root, "model");
  snprintf(model, size, "%s", cJSON_IsString(name) ? name->valuestring : "");
}

static int report_fill(const char *path, const cJSON *root, PlotReport *report) {
  const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "schema");
  if (!cJSON_IsString(schema) || strncmp(schema->valuestring, "obcache-analysis/", 17))
    return obc_fail(OBC_EFORMAT,
                    "%s: schema is %s (expected \"obcache-analysis/1\": the report of "
                    "`obcache analyze`)",
                    path, cJSON_IsString(schema) ? schema->valuestring : "missing");
  const cJSON *parameters = cJSON_GetObjectItemCaseSensitive(root, "parameters");
  if (!cJSON_IsObject(parameters))
    return obc_fail(OBC_EFORMAT, "%s: no \"parameters\" object", path);
  model_name_of(root, report->model, sizeof report->model);
  int rc = json_size(path, parameters, "main_window", &report->main_window);
  if (!rc) rc = json_sizes(path, parameters, "windows", report->windows, &report->n_windows);
  if (!rc) rc = json_sizes(path, parameters, "topk", report->topk, &report->n_topk);
  if (rc) return rc;
  size_t recents[PLOT_MAX_VALUES], n_recents = 0;
  if (cJSON_GetObjectItemCaseSensitive(parameters, "recent")) {
    rc = json_sizes(path, parameters, "recent", recents, &n_recents);
    if (rc) return rc;
  }
  report->recent = 0;
  for (size_t i = 0; i < n_recents; i++)
    if (recents[i] > report->recent) report->recent = recents[i];
  if (cJSON_GetObjectItemCaseSensitive(parameters, "main_k")) {
    rc = json_size(path, parameters, "main_k", &report->main_k);
    if (rc) return rc;
  } else if (plot_report_contains(report->topk, report->n_topk, 40)) {
    report->main_k = 40; /* the paper's headline budget */
  } else {
    report->main_k = 0;
    for (size_t i = 0; i < report->n_topk; i++)
      if (report->topk[i] > report->main_k) report->main_k = report->topk[i];
  }
  const cJSON *oracle = cJSON_GetObjectItemCaseSensitive(parameters, "oracle");
  OracleSteps steps;
  const char *name = cJSON_IsString(oracle) ? oracle->valuestring : "oracle@1";
  if (oracle_steps_parse("parameters.oracle", name, &steps)) /* oracle1, oracleT read too */
    return obc_fail(OBC_EFORMAT,
                    "%s: parameters.oracle is \"%s\" (expected oracle@1, oracle@T "
                    "or oracle@a-b)",
                    path, name);
  oracle_steps_name("oracle", &steps, report->oracle, sizeof report->oracle);
  const cJSON *references = cJSON_GetObjectItemCaseSensitive(parameters, "references");
  const cJSON *item;
  size_t used = 0;
  cJSON_ArrayForEach(item, references) {
    if (cJSON_IsString(item) && used < sizeof report->references)
      used += (size_t)snprintf(report->references + used, sizeof report->references - used, "%s%s",
                               used ? " " : "", item->valuestring);
  }
  if (!plot_report_contains(report->windows, report->n_windows, report->main_window))
    return obc_fail(OBC_EFORMAT, "%s: main_window %zu is not among parameters.windows", path,
                    report->main_window);
  return OBC_OK;
}

int plot_report_read(const char *dir, PlotReport *report) {
  memset(report, 0, sizeof *report);
  if ((size_t)snprintf(report->path, sizeof report->path, "%s/report.json", dir) >=
      sizeof report->path)
    return obc_fail(OBC_EINVAL, "%s: path too long", dir);
  cJSON *root = NULL;
  int rc = json_load(report->path, &root);
  if (rc) return rc;
  rc = report_fill(report->path, root, report);
  cJSON_Delete(root);
  return rc;
}

void plot_report_model_name(const char *path, char *model, size_t size) {
  model[0] = '\0';
  cJSON *root = NULL;
  if (json_load(path, &root)) {
    obc_error_clear();
    return;
  }
  model_name_of(root, model, size);
  cJSON_Delete(root);
}
