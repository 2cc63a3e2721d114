/* Defaults and validation of the analyser's parameters against a trace: the
 * window list (1, 2, 4, ... up to the captured contiguous prompt rows), the
 * budget list (a recall@k curve around the paper's top-40), the recent window
 * and the oracle. Every error names the option and the valid range. */
#include <stdlib.h>
#include <string.h>

#include "analyze/analysis.h"
#include "common/obc_error.h"

/* The recall@k curve used when --topk is not given (capped at n_prompt). */
static const size_t default_topk_curve[] = {1, 2, 5, 10, 20, 40, 60, 80, 100};

void analysis_config_default(AnalysisConfig *config) {
  memset(config, 0, sizeof *config);
  config->oracle = ORACLE_STEPS_ONE;
  score_options_default(&config->score_options);
  config->buckets = OBC_ANALYSIS_DEFAULT_BUCKETS;
  config->taylor_points = OBC_ANALYSIS_DEFAULT_TAYLOR_POINTS;
}

static int compare_sizes(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

/* Sorts values (count) ascending and drops duplicates. */
static void sort_unique(size_t *values, size_t *count) {
  qsort(values, *count, sizeof *values, compare_sizes);
  size_t out = 0;
  for (size_t i = 0; i < *count; i++)
    if (out == 0 || values[out - 1] != values[i]) values[out++] = values[i];
  *count = out;
}

static int resolve_windows(AnalysisConfig *config, size_t max_window) {
  if (config->n_windows == 0) {
    for (size_t w = 1; w < max_window && config->n_windows < OBC_ANALYSIS_MAX_LIST - 1; w *= 2)
      config->windows[config->n_windows++] = w;
    config->windows[config->n_windows++] = max_window;
    config->main_window = max_window < OBC_ANALYSIS_DEFAULT_MAIN_WINDOW
                              ? max_window
                              : OBC_ANALYSIS_DEFAULT_MAIN_WINDOW;
  } else {
    config->main_window = config->windows[0];
    for (size_t i = 0; i < config->n_windows; i++)
      if (config->windows[i] < 1 || config->windows[i] > max_window)
        return obc_fail(OBC_EINVAL,
                        "--window: W=%zu out of range (valid 1..%zu, the captured contiguous "
                        "prompt rows of the trace)",
                        config->windows[i], max_window);
  }
  /* The default main window is a power of two <= max or max itself, so it is
   * in the default list; a given one is its list's first entry. */
  sort_unique(config->windows, &config->n_windows);
  return OBC_OK;
}

static int resolve_topk(AnalysisConfig *config, size_t n_prompt) {
  if (config->n_topk == 0) {
    config->topk_given = false;
    config->main_k =
        n_prompt < OBC_ANALYSIS_DEFAULT_MAIN_K ? n_prompt : OBC_ANALYSIS_DEFAULT_MAIN_K;
    for (size_t i = 0; i < sizeof default_topk_curve / sizeof *default_topk_curve; i++)
      if (default_topk_curve[i] <= n_prompt) config->topk[config->n_topk++] = default_topk_curve[i];
    config->topk[config->n_topk++] = config->main_k;
  } else {
    config->topk_given = true;
    config->main_k = config->topk[0];
    for (size_t i = 0; i < config->n_topk; i++)
      if (config->topk[i] < 1 || config->topk[i] > n_prompt)
        return obc_fail(OBC_EINVAL, "--topk: k=%zu out of range (valid 1..%zu, the prompt length)",
                        config->topk[i], n_prompt);
  }
  sort_unique(config->topk, &config->n_topk);
  return OBC_OK;
}

static int resolve_recent(const AnalysisConfig *config) {
  size_t r = config->recent;
  if (r == 0) return OBC_OK;
  /* A recent window must leave room for scored positions: r < k. With a
   * user list every k must allow it; the default curve only needs the main
   * budget to (curve points k <= r are reported for r = 0 only). */
  size_t smallest = config->topk_given ? config->topk[0] : config->main_k;
  if (r >= smallest)
    return obc_fail(OBC_EINVAL,
                    "--recent: r=%zu out of range (valid 0..%zu: r must be below the budget "
                    "k=%zu)",
                    r, smallest - 1, smallest);
  return OBC_OK;
}

int analysis_config_resolve(AnalysisConfig *config, const TraceMeta *meta) {
  size_t first_decode = 0;
  size_t decode_rows = trace_meta_decode_rows(meta, &first_decode);
  if (decode_rows == 0)
    return obc_fail(OBC_EINVAL,
                    "the oracle needs decode rows, and the trace has none (expected at least 1 "
                    "captured decode step; capture with decode steps)");
  size_t max_window = trace_meta_window_rows(meta);
  if (max_window == 0)
    return obc_fail(OBC_EINVAL,
                    "no captured prompt rows end at the last prompt position (expected a "
                    "contiguous block of rows; the window scores need them)");
  size_t first_step = 0, n_steps = 0;
  int rc = oracle_steps_resolve(&config->oracle, decode_rows, NULL, &first_step, &n_steps);
  if (rc) return rc;
  if ((rc = resolve_windows(config, max_window))) return rc;
  if ((rc = resolve_topk(config, meta->n_prompt))) return rc;
  if ((rc = resolve_recent(config))) return rc;
  if (config->buckets < 1 || config->buckets > meta->n_prompt)
    return obc_fail(OBC_EINVAL, "--buckets: B=%zu out of range (valid 1..%zu, the prompt length)",
                    config->buckets, meta->n_prompt);
  const char *dot = config->scores_out ? strrchr(config->scores_out, '.') : NULL;
  if (dot && !strcmp(dot, ".csv"))
    return obc_fail(OBC_EINVAL,
                    "--scores-out %.200s: analyze writes every quantity of every head as HDF5 "
                    "(name it FILE.h5; evict --scores-out writes one score as CSV)",
                    config->scores_out);
  size_t kernel = config->score_options.maxpool_kernel;
  if (kernel < 1 || kernel % 2 == 0 || kernel > meta->n_prompt)
    return obc_fail(OBC_EINVAL, "--maxpool-kernel: %zu is not valid (expected an odd width 1..%zu)",
                    kernel, meta->n_prompt);
  return OBC_OK;
}
