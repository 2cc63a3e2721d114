/* The eval folder's figures (plots/plot_eval.h): checks every row of
 * accuracy.csv, paired.csv and recall.csv before anything is drawn, collects
 * the panels, budgets, series and budget groups the scripts take as
 * variables, and writes the forest plot's table and index.html. */
#include "plots/plot_eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_html.h"
#include "plots/plot_inputs.h"

static const char *const ACCURACY_COLUMNS =
    "task,length,policy,budget,protocol,n,correct,accuracy,ci_low,ci_high,score,recall,fraction";
static const char *const PAIRED_COLUMNS =
    "task,length,baseline,paired,budget,protocol,n,baseline_correct,paired_correct,"
    "baseline_only,paired_only,difference,ci_low,ci_high,mcnemar_p";
/* Optional: RULER's score interval and the score's paired test (written by
 * `obcache eval`; a folder without them is drawn by accuracy). */
static const char *const SCORE_COLUMNS = "score_ci_low,score_ci_high";
static const char *const PAIRED_SCORE_COLUMNS =
    "baseline_score,paired_score,score_difference,score_ci_low,score_ci_high,sign_flip_p";
static const char *const RECALL_COLUMNS =
    "budget,quartile,recall_low,recall_high,n,correct,accuracy,ci_low,ci_high,auc";

/* The files print their numbers with %.9g: a share and the bounds of its
 * interval, or a difference and the counts it comes from, may disagree by
 * half a unit in the ninth digit each. */
#define EVAL_ROUNDING 1e-8

/* ---- checked cells ---- */

/* The column of a name that require() has checked. */
static size_t column_of(const PlotTable *table, const char *name) {
  size_t column = 0;
  plot_table_column(table, name, &column);
  return column;
}

static const char *cell(const PlotTable *table, size_t row, const char *name) {
  return plot_table_cell(table, row, column_of(table, name));
}

/* A task, policy or protocol name: letters, digits and _ : + @ % . - only
 * (what gnuplot's word lists and the HTML take as they are). */
static int check_name(const PlotTable *table, size_t row, const char *name, int allow_empty) {
  const char *text = cell(table, row, name);
  size_t length = strlen(text);
  int ok = length < PLOT_EVAL_NAME_SIZE && (allow_empty || length > 0);
  for (const char *p = text; ok && *p; p++)
    ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
         strchr("_:+@%.-", *p);
  if (!ok)
    return obc_fail(OBC_EFORMAT,
                    "%s: line %zu, column '%s': '%.80s' is not a name (expected %s1 to %d letters, "
                    "digits or _ : + @ %% . -)",
                    table->path, row + 2, name, text, allow_empty ? "nothing or " : "",
                    PLOT_EVAL_NAME_SIZE - 1);
  return OBC_OK;
}

/* A number in [low, high]; an empty field (or "nan") gives NaN when
 * allow_empty. */
static int check_number(const PlotTable *table, size_t row, const char *name, double low,
                        double high, int allow_empty, double *out) {
  const char *text = cell(table, row, name);
  *out = NAN;
  if (allow_empty && (!text[0] || !strcmp(text, "nan") || !strcmp(text, "NaN"))) {
    *out = NAN;
    return OBC_OK;
  }
  double value;
  int rc = plot_table_number(table, row, column_of(table, name), &value);
  if (rc) return rc;
  if (!(value >= low && value <= high))
    return obc_fail(OBC_EFORMAT, "%s: line %zu, column '%s': %s is outside [%g, %g]", table->path,
                    row + 2, name, text, low, high);
  *out = value;
  return OBC_OK;
}

/* A whole number in [low, high]. */
static int check_count(const PlotTable *table, size_t row, const char *name, double low,
                       double high, double *out) {
  int rc = check_number(table, row, name, low, high, 0, out);
  if (!rc && *out != floor(*out))
    return obc_fail(OBC_EFORMAT, "%s: line %zu, column '%s': %s is not a whole number", table->path,
                    row + 2, name, cell(table, row, name));
  return rc;
}

/* A budget "P%" with 0 < P <= 100 (its P in *percent), or "all" when
 * allow_all (*percent = -1). */
static int check_budget(const PlotTable *table, size_t row, int allow_all, double *percent) {
  const char *text = cell(table, row, "budget");
  if (allow_all && !strcmp(text, "all")) {
    *percent = -1;
    return OBC_OK;
  }
  char *end = NULL;
  double value = strtod(text, &end);
  if (end == text || strcmp(end, "%") || !(value > 0 && value <= 100) || strlen(text) >= 24)
    return obc_fail(OBC_EFORMAT,
                    "%s: line %zu, column 'budget': '%.80s' is not a budget (expected %s"
                    "a share of the prompt such as 10%%)",
                    table->path, row + 2, text, allow_all ? "all or " : "");
  *percent = value;
  return OBC_OK;
}

static int check_protocol(const PlotTable *table, size_t row, int allow_empty) {
  const char *text = cell(table, row, "protocol");
  if ((allow_empty && !text[0]) || !strcmp(text, "agnostic") || !strcmp(text, "aware") ||
      !strcmp(text, "agnostic-captured"))
    return OBC_OK;
  return obc_fail(OBC_EFORMAT,
                  "%s: line %zu, column 'protocol': '%.80s' (expected agnostic, aware or "
                  "agnostic-captured%s)",
                  table->path, row + 2, text, allow_empty ? ", or nothing" : "");
}

/* n, correct <= n, accuracy = correct / n inside [ci_low, ci_high]. */
static int check_share(const PlotTable *table, size_t row, double *accuracy) {
  double n, correct, low, high;
  int rc = check_count(table, row, "n", 1, 1e12, &n);
  if (!rc) rc = check_count(table, row, "correct", 0, n, &correct);
  if (!rc) rc = check_number(table, row, "accuracy", 0, 1, 0, accuracy);
  if (!rc) rc = check_number(table, row, "ci_low", 0, 1, 0, &low);
  if (!rc) rc = check_number(table, row, "ci_high", 0, 1, 0, &high);
  if (rc) return rc;
  if (fabs(*accuracy - correct / n) > EVAL_ROUNDING)
    return obc_fail(OBC_EFORMAT, "%s: line %zu: accuracy %s is not correct/n = %g/%g", table->path,
                    row + 2, cell(table, row, "accuracy"), correct, n);
  if (low > *accuracy + EVAL_ROUNDING || high < *accuracy - EVAL_ROUNDING)
    return obc_fail(OBC_EFORMAT, "%s: line %zu: interval [%s, %s] does not contain accuracy %s",
                    table->path, row + 2, cell(table, row, "ci_low"), cell(table, row, "ci_high"),
                    cell(table, row, "accuracy"));
  return OBC_OK;
}

/* Whether the table has every column of the list. */
static int has_columns(const PlotTable *table, const char *columns) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", columns);
  char *save = NULL;
  for (char *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    size_t unused;
    if (plot_table_column(table, name, &unused)) return 0;
  }
  return 1;
}

/* value inside [low, high] of the named columns, all in [lo, hi]. */
static int check_interval(const PlotTable *table, size_t row, const char *value_name,
                          const char *low_name, const char *high_name, double lo, double hi) {
  double value, low, high;
  int rc = check_number(table, row, value_name, lo, hi, 0, &value);
  if (!rc) rc = check_number(table, row, low_name, lo, hi, 0, &low);
  if (!rc) rc = check_number(table, row, high_name, lo, hi, 0, &high);
  if (!rc && (low > value + EVAL_ROUNDING || high < value - EVAL_ROUNDING))
    rc = obc_fail(OBC_EFORMAT, "%s: line %zu: interval [%s, %s] does not contain %s %s",
                  table->path, row + 2, cell(table, row, low_name), cell(table, row, high_name),
                  value_name, cell(table, row, value_name));
  return rc;
}

/* ---- the three files ---- */

static size_t name_index(char (*names)[PLOT_EVAL_NAME_SIZE], size_t n, const char *name) {
  size_t i = 0;
  while (i < n && strcmp(names[i], name)) i++;
  return i;
}

static int too_many(const PlotTable *table, size_t row, const char *what) {
  return obc_fail(OBC_EFORMAT, "%s: line %zu: more than %d distinct %s", table->path, row + 2,
                  PLOT_EVAL_MAX_NAMES, what);
}

/* Adds a budget keeping them in ascending share. */
static int budget_insert(PlotEval *eval, const PlotTable *table, size_t row, double percent) {
  const char *text = cell(table, row, "budget");
  double percents[PLOT_EVAL_MAX_NAMES];
  for (size_t i = 0; i < eval->n_budgets; i++) {
    percents[i] = strtod(eval->budgets[i], NULL);
    if (!strcmp(eval->budgets[i], text)) return OBC_OK;
    if (percents[i] == percent)
      return obc_fail(OBC_EFORMAT, "%s: line %zu: budget %s is %s written differently", table->path,
                      row + 2, text, eval->budgets[i]);
  }
  if (eval->n_budgets == PLOT_EVAL_MAX_NAMES) return too_many(table, row, "budgets");
  size_t at = 0;
  while (at < eval->n_budgets && percents[at] < percent) at++;
  memmove(eval->budgets[at + 1], eval->budgets[at],
          (eval->n_budgets - at) * sizeof eval->budgets[0]);
  snprintf(eval->budgets[at], sizeof eval->budgets[0], "%s", text);
  eval->n_budgets++;
  return OBC_OK;
}

/* Each row of accuracy.csv, and the panels, budgets and series. */
static int read_accuracy(PlotEval *eval) {
  const PlotTable *t = &eval->accuracy;
  int rc = plot_table_require(t, ACCURACY_COLUMNS);
  eval->has_score = !rc && has_columns(t, SCORE_COLUMNS);
  if (!rc && t->n_rows == 0) rc = obc_fail(OBC_EFORMAT, "%s: no data rows", t->path);
  char tasks[PLOT_EVAL_MAX_NAMES][PLOT_EVAL_NAME_SIZE], protocols[4][PLOT_EVAL_NAME_SIZE];
  size_t n_tasks = 0, n_protocols = 0;
  double lengths[PLOT_EVAL_MAX_NAMES];
  size_t n_lengths = 0;
  for (size_t row = 0; row < t->n_rows && !rc; row++) {
    double length, accuracy, value, percent = 0;
    const char *policy = cell(t, row, "policy");
    int full = !strcmp(policy, "full"), oracle = !strncmp(policy, "oracle@", 7);
    rc = check_name(t, row, "task", 0);
    if (!rc) rc = check_count(t, row, "length", 1, 1e12, &length);
    if (!rc) rc = check_name(t, row, "policy", 0);
    if (!rc && full && (cell(t, row, "budget")[0] || cell(t, row, "protocol")[0]))
      rc = obc_fail(OBC_EFORMAT, "%s: line %zu: the full cache has a budget or protocol", t->path,
                    row + 2);
    if (!rc && !full) rc = check_budget(t, row, 0, &percent);
    if (!rc && !full) rc = check_protocol(t, row, oracle);
    if (!rc) rc = check_share(t, row, &accuracy);
    if (!rc) rc = check_number(t, row, "score", 0, 1, 0, &value);
    if (!rc && eval->has_score)
      rc = check_interval(t, row, "score", "score_ci_low", "score_ci_high", 0, 1);
    if (!rc) rc = check_number(t, row, "recall", 0, 1, 1, &value);
    if (!rc) rc = check_number(t, row, "fraction", 0, 1, 1, &value);
    if (rc) break;
    const char *task = cell(t, row, "task");
    size_t at = name_index(tasks, n_tasks, task);
    if (at == n_tasks && n_tasks == PLOT_EVAL_MAX_NAMES) return too_many(t, row, "tasks");
    if (at == n_tasks) snprintf(tasks[n_tasks++], sizeof tasks[0], "%s", task);
    size_t l = 0;
    while (l < n_lengths && lengths[l] != length) l++;
    if (l == n_lengths && n_lengths == PLOT_EVAL_MAX_NAMES) return too_many(t, row, "lengths");
    if (l == n_lengths) lengths[n_lengths++] = length;
    if (full) continue;
    rc = budget_insert(eval, t, row, percent);
    const char *protocol = cell(t, row, "protocol");
    size_t s = 0;
    while (s < eval->n_series &&
           (strcmp(eval->series[s].policy, policy) || strcmp(eval->series[s].protocol, protocol)))
      s++;
    if (!rc && s == eval->n_series) {
      if (s == PLOT_EVAL_MAX_NAMES) return too_many(t, row, "(policy, protocol) series");
      snprintf(eval->series[s].policy, sizeof eval->series[s].policy, "%s", policy);
      snprintf(eval->series[s].protocol, sizeof eval->series[s].protocol, "%s", protocol);
      eval->n_series++;
    }
    if (protocol[0] && name_index(protocols, n_protocols, protocol) == n_protocols &&
        n_protocols < 4)
      snprintf(protocols[n_protocols++], sizeof protocols[0], "%s", protocol);
  }
  if (rc) return rc;
  if (eval->n_series == 0)
    return obc_fail(OBC_EFORMAT,
                    "%s: only full-cache rows (expected rows of eviction policies at budgets)",
                    t->path);
  eval->n_protocols = n_protocols;
  /* Panels: lengths ascending, then the tasks in file order, "all" last. */
  for (size_t a = 1; a < n_lengths; a++)
    for (size_t b = a; b > 0 && lengths[b - 1] > lengths[b]; b--) {
      double swap = lengths[b];
      lengths[b] = lengths[b - 1];
      lengths[b - 1] = swap;
    }
  for (size_t l = 0; l < n_lengths; l++)
    for (size_t pass = 0; pass < 2; pass++)
      for (size_t k = 0; k < n_tasks; k++) {
        if ((pass == 0) == !strcmp(tasks[k], "all")) continue;
        double full = NAN;
        int present = 0;
        for (size_t row = 0; row < t->n_rows; row++) {
          double length = strtod(cell(t, row, "length"), NULL);
          if (length != lengths[l] || strcmp(cell(t, row, "task"), tasks[k])) continue;
          present = 1;
          if (!strcmp(cell(t, row, "policy"), "full"))
            full = strtod(cell(t, row, eval->has_score ? "score" : "accuracy"), NULL);
        }
        if (!present) continue;
        if (eval->n_panels == PLOT_EVAL_MAX_NAMES)
          return obc_fail(OBC_EFORMAT, "%s: more than %d (task, length) panels", t->path,
                          PLOT_EVAL_MAX_NAMES);
        size_t p = eval->n_panels++;
        snprintf(eval->panel_task[p], sizeof eval->panel_task[p], "%s", tasks[k]);
        snprintf(eval->panel_length[p], sizeof eval->panel_length[p], "%.0f", lengths[l]);
        eval->full[p] = full;
      }
  return OBC_OK;
}

static int read_paired(PlotEval *eval) {
  const PlotTable *t = &eval->paired;
  int rc = plot_table_require(t, PAIRED_COLUMNS);
  eval->paired_has_score = !rc && has_columns(t, PAIRED_SCORE_COLUMNS);
  for (size_t row = 0; row < t->n_rows && !rc; row++) {
    double length, percent, n, base, paired, base_only, paired_only, difference, low, high, p;
    rc = check_name(t, row, "task", 0);
    if (!rc) rc = check_count(t, row, "length", 1, 1e12, &length);
    if (!rc) rc = check_name(t, row, "baseline", 0);
    if (!rc) rc = check_name(t, row, "paired", 0);
    if (!rc) rc = check_budget(t, row, 0, &percent);
    if (!rc) rc = check_protocol(t, row, 1);
    if (!rc) rc = check_count(t, row, "n", 1, 1e12, &n);
    if (!rc) rc = check_count(t, row, "baseline_correct", 0, n, &base);
    if (!rc) rc = check_count(t, row, "paired_correct", 0, n, &paired);
    if (!rc) rc = check_count(t, row, "baseline_only", 0, base, &base_only);
    if (!rc) rc = check_count(t, row, "paired_only", 0, paired, &paired_only);
    if (!rc) rc = check_number(t, row, "difference", -1, 1, 0, &difference);
    if (!rc) rc = check_number(t, row, "ci_low", -1, 1, 0, &low);
    if (!rc) rc = check_number(t, row, "ci_high", -1, 1, 0, &high);
    if (!rc) rc = check_number(t, row, "mcnemar_p", 0, 1, 0, &p);
    if (!rc && eval->paired_has_score) {
      double score;
      rc = check_number(t, row, "baseline_score", 0, 1, 0, &score);
      if (!rc) rc = check_number(t, row, "paired_score", 0, 1, 0, &score);
      if (!rc)
        rc = check_interval(t, row, "score_difference", "score_ci_low", "score_ci_high", -1, 1);
      if (!rc) rc = check_number(t, row, "sign_flip_p", 0, 1, 0, &p);
    }
    if (rc) break;
    if (fabs(difference - (paired - base) / n) > EVAL_ROUNDING ||
        paired - paired_only != base - base_only)
      rc = obc_fail(OBC_EFORMAT,
                    "%s: line %zu: difference %s and the counts disagree (expected "
                    "(paired_correct - baseline_correct) / n, and as many right under both)",
                    t->path, row + 2, cell(t, row, "difference"));
    else if (low > high)
      rc = obc_fail(OBC_EFORMAT, "%s: line %zu: interval [%s, %s] is reversed", t->path, row + 2,
                    cell(t, row, "ci_low"), cell(t, row, "ci_high"));
  }
  return rc;
}

static int read_recall(PlotEval *eval) {
  const PlotTable *t = &eval->recall;
  int rc = plot_table_require(t, RECALL_COLUMNS);
  for (size_t row = 0; row < t->n_rows && !rc; row++) {
    double percent, quartile, low, high, accuracy, auc;
    rc = check_budget(t, row, 1, &percent);
    if (!rc) rc = check_count(t, row, "quartile", 1, 4, &quartile);
    if (!rc) rc = check_number(t, row, "recall_low", 0, 1, 0, &low);
    if (!rc) rc = check_number(t, row, "recall_high", low, 1, 0, &high);
    if (!rc) rc = check_share(t, row, &accuracy);
    if (!rc) rc = check_number(t, row, "auc", 0, 1, 1, &auc);
    if (rc) break;
    const char *budget = cell(t, row, "budget");
    size_t g = 0;
    while (g < eval->n_groups && strcmp(eval->groups[g], budget)) g++;
    if (g < eval->n_groups) {
      if (!(eval->group_auc[g] == auc || (isnan(auc) && isnan(eval->group_auc[g]))))
        rc = obc_fail(OBC_EFORMAT, "%s: line %zu: auc %s differs from the budget's earlier rows",
                      t->path, row + 2, cell(t, row, "auc"));
      continue;
    }
    if (g == PLOT_EVAL_MAX_NAMES) return too_many(t, row, "budget groups");
    snprintf(eval->groups[g], sizeof eval->groups[g], "%s", budget);
    eval->group_auc[g] = auc;
    eval->n_groups++;
  }
  return rc;
}

int plot_eval_read(const char *dir, PlotEval *eval) {
  memset(eval, 0, sizeof *eval);
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/accuracy.csv", dir) >= sizeof path)
    return obc_fail(OBC_EINVAL, "%s: path too long", dir);
  int rc = plot_table_read(path, &eval->accuracy);
  if (!rc) rc = read_accuracy(eval);
  if (!rc && plot_file_exists(dir, "paired.csv")) {
    snprintf(path, sizeof path, "%s/paired.csv", dir);
    rc = plot_table_read(path, &eval->paired);
    eval->has_paired = !rc;
    if (!rc) rc = read_paired(eval);
  }
  if (!rc && plot_file_exists(dir, "recall.csv")) {
    snprintf(path, sizeof path, "%s/recall.csv", dir);
    rc = plot_table_read(path, &eval->recall);
    eval->has_recall = !rc;
    if (!rc) rc = read_recall(eval);
  }
  if (rc) plot_eval_free(eval);
  return rc;
}

void plot_eval_free(PlotEval *eval) {
  plot_table_free(&eval->accuracy);
  plot_table_free(&eval->paired);
  plot_table_free(&eval->recall);
  eval->has_paired = eval->has_recall = eval->has_score = eval->paired_has_score = 0;
}

/* ---- gnuplot variables ---- */

/* Appends word (or "-" for an empty one) to a space-separated list. */
static void list_add(char *list, size_t size, const char *word) {
  size_t used = strlen(list);
  snprintf(list + used, size - used, "%s%s", used ? " " : "", word[0] ? word : "-");
}

void plot_eval_args(const PlotEval *eval, const char *name, const char *dir, const char *out_dir,
                    PlotArgs *args) {
  char path[4096], list[4096];
  if (!strcmp(name, "eval_paired")) {
    snprintf(path, sizeof path, "%s/eval_paired.csv", out_dir);
    plot_args_string(args, "data", path);
    plot_args_string(args, "metric",
                     eval->paired_has_score ? "RULER score difference" : "accuracy difference");
    plot_args_string(args, "test", eval->paired_has_score ? "sign-flip" : "McNemar");
    return;
  }
  if (!strcmp(name, "eval_recall")) {
    snprintf(path, sizeof path, "%s/recall.csv", dir);
    plot_args_string(args, "data", path);
    list[0] = '\0';
    for (size_t g = 0; g < eval->n_groups; g++) list_add(list, sizeof list, eval->groups[g]);
    plot_args_string(args, "groups", list);
    list[0] = '\0';
    for (size_t g = 0; g < eval->n_groups; g++) {
      char value[32];
      snprintf(value, sizeof value, "%.3f", eval->group_auc[g]);
      list_add(list, sizeof list, isnan(eval->group_auc[g]) ? "n/a" : value);
    }
    plot_args_string(args, "aucs", list);
    return;
  }
  snprintf(path, sizeof path, "%s/accuracy.csv", dir);
  plot_args_string(args, "data", path);
  plot_args_string(args, "value", eval->has_score ? "score" : "accuracy");
  plot_args_string(args, "value_low", eval->has_score ? "score_ci_low" : "ci_low");
  plot_args_string(args, "value_high", eval->has_score ? "score_ci_high" : "ci_high");
  plot_args_string(args, "value_label",
                   eval->has_score ? "RULER score (mean string_match_all)" : "accuracy");
  plot_args_string(args, "interval_label", eval->has_score ? "bootstrap 95%" : "Wilson 95%");
  list[0] = '\0';
  for (size_t p = 0; p < eval->n_panels; p++) list_add(list, sizeof list, eval->panel_task[p]);
  plot_args_string(args, "tasks", list);
  list[0] = '\0';
  int several_lengths = 0;
  for (size_t p = 0; p < eval->n_panels; p++) {
    list_add(list, sizeof list, eval->panel_length[p]);
    several_lengths |= strcmp(eval->panel_length[p], eval->panel_length[0]) != 0;
  }
  plot_args_string(args, "lengths", list);
  plot_args_size(args, "several_lengths", (size_t)several_lengths);
  list[0] = '\0';
  for (size_t p = 0; p < eval->n_panels; p++) {
    char value[32];
    snprintf(value, sizeof value, "%.9g", eval->full[p]);
    list_add(list, sizeof list, isnan(eval->full[p]) ? "NaN" : value);
  }
  plot_args_string(args, "full", list);
  list[0] = '\0';
  for (size_t b = 0; b < eval->n_budgets; b++) list_add(list, sizeof list, eval->budgets[b]);
  plot_args_string(args, "budgets", list);
  list[0] = '\0';
  for (size_t s = 0; s < eval->n_series; s++) list_add(list, sizeof list, eval->series[s].policy);
  plot_args_string(args, "policies", list);
  list[0] = '\0';
  for (size_t s = 0; s < eval->n_series; s++) list_add(list, sizeof list, eval->series[s].protocol);
  plot_args_string(args, "protocols", list);
  plot_args_size(args, "several_protocols", eval->n_protocols > 1);
}

/* ---- derived table and index ---- */

int plot_eval_write_paired(const PlotEval *eval, const char *out_dir, PlotResult *result) {
  const PlotTable *t = &eval->paired;
  int pooled = 0, several_lengths = 0;
  for (size_t row = 0; row < t->n_rows; row++) {
    pooled |= !strcmp(cell(t, row, "task"), "all");
    several_lengths |= strcmp(cell(t, row, "length"), cell(t, 0, "length")) != 0;
  }
  ObcPendingFile file;
  FILE *fp;
  int rc = obc_text_open_in(&file, out_dir, "eval_paired.csv", &fp);
  if (rc) return rc;
  fprintf(fp, "row,label,difference,ci_low,ci_high,p\n");
  int score = eval->paired_has_score;
  const char *difference = score ? "score_difference" : "difference";
  const char *low = score ? "score_ci_low" : "ci_low", *high = score ? "score_ci_high" : "ci_high";
  const char *p = score ? "sign_flip_p" : "mcnemar_p";
  size_t written = 0;
  for (size_t row = 0; row < t->n_rows; row++) {
    if (pooled && strcmp(cell(t, row, "task"), "all")) continue;
    /* The label names pair, budget, protocol (when several), task (when not
     * pooled), length (when several) and p; no commas: it is a CSV field. */
    fprintf(fp, "%zu,%s vs %s @ %s", ++written, cell(t, row, "paired"), cell(t, row, "baseline"),
            cell(t, row, "budget"));
    if (eval->n_protocols > 1 && cell(t, row, "protocol")[0])
      fprintf(fp, " %s", cell(t, row, "protocol"));
    if (!pooled) fprintf(fp, " %s", cell(t, row, "task"));
    if (several_lengths) fprintf(fp, " L%s", cell(t, row, "length"));
    fprintf(fp, "  (p = %.2g),%s,%s,%s,%s\n", strtod(cell(t, row, p), NULL),
            cell(t, row, difference), cell(t, row, low), cell(t, row, high), cell(t, row, p));
  }
  rc = obc_text_close(&file, fp, 1);
  if (!rc) plot_result_add(result, file.final_path);
  return rc;
}

static void html_table(FILE *out, const PlotTable *t, const char *caption) {
  fputs("<h2>", out);
  obc_html_text(out, caption);
  fputs("</h2>\n<table>\n<tr>", out);
  for (size_t c = 0; c < t->n_columns; c++) {
    fputs("<th>", out);
    obc_html_text(out, t->cells[c]);
    fputs("</th>", out);
  }
  fputs("</tr>\n", out);
  for (size_t row = 0; row < t->n_rows; row++) {
    fputs("<tr>", out);
    for (size_t c = 0; c < t->n_columns; c++) {
      const char *text = plot_table_cell(t, row, c);
      char *end = NULL;
      double value = strtod(text, &end);
      fputs("<td>", out);
      if (text[0] && !*end && value != floor(value)) /* shares: 4 digits are enough to read */
        fprintf(out, "%.4f", value);
      else
        obc_html_text(out, text);
      fputs("</td>", out);
    }
    fputs("</tr>\n", out);
  }
  fputs("</table>\n", out);
}

int plot_eval_write_index(const PlotEval *eval, const char *dir, const char *out_dir,
                          PlotResult *result) {
  ObcPendingFile file;
  FILE *out;
  int rc = obc_text_open_in(&file, out_dir, "index.html", &out);
  if (rc) return rc;
  fputs("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>obcache eval: ", out);
  obc_html_text(out, dir);
  fputs(
      "</title>\n<style>body{font-family:sans-serif;max-width:1200px;margin:auto}"
      "td,th{padding:2px 8px;text-align:right}img{max-width:100%}</style></head><body>\n"
      "<h1>Task accuracy under KV-cache eviction</h1>\n<p>Folder <code>",
      out);
  obc_html_text(out, dir);
  fprintf(out, "</code>: %zu (task, length) panels, %zu budgets, %zu policies. %s</p>\n",
          eval->n_panels, eval->n_budgets, eval->n_series,
          eval->has_score
              ? "The figures draw RULER's score (mean string_match_all, over all tasks the mean "
                "of the task means) with its bootstrap 95% interval; the tables give it beside "
                "the accuracy (every answer found) with its Wilson 95% interval, and each "
                "paired difference with a paired bootstrap interval, the sign-flip p of the "
                "score and the exact McNemar p of the accuracy."
              : "Accuracy with its Wilson 95% interval; paired differences with a paired "
                "bootstrap interval and the exact McNemar p.");
  size_t count = 0;
  const PlotFigure *figures = plot_figures(&count);
  for (size_t i = 0; i < count; i++) {
    if (strncmp(figures[i].name, "eval_", 5)) continue;
    static const char *const formats[2] = {"png", "svg"};
    for (size_t f = 0; f < 2; f++) {
      char path[4096];
      struct stat st;
      snprintf(path, sizeof path, "%s/%s.%s", out_dir, figures[i].name, formats[f]);
      if (stat(path, &st) != 0) continue;
      fprintf(out, "<figure><img src=\"%s.%s\" alt=\"%s\"><figcaption>", figures[i].name,
              formats[f], figures[i].name);
      const char *question = figures[i].question; /* without --help's "eval folders: " */
      if (!strncmp(question, "eval folders: ", 14)) question += 14;
      obc_html_text(out, question);
      fputs("</figcaption></figure>\n", out);
      break;
    }
  }
  html_table(out, &eval->accuracy, "Accuracy (accuracy.csv)");
  if (eval->has_paired) html_table(out, &eval->paired, "Paired comparisons (paired.csv)");
  fputs("</body></html>\n", out);
  rc = obc_text_close(&file, out, 1);
  if (!rc) plot_result_add(result, file.final_path);
  return rc;
}

int plot_eval(const char *dir, const PlotOptions *options, PlotResult *result) {
  if (!dir || !plot_file_exists(dir, "accuracy.csv")) {
    memset(result, 0, sizeof *result);
    return obc_fail(OBC_ENOTFOUND,
                    "%s/accuracy.csv: not found (expected a folder written by `obcache eval`)",
                    dir ? dir : "(no folder)");
  }
  PlotOptions eval_options = *options;
  eval_options.dir = dir;
  return plot_render(&eval_options, result);
}
