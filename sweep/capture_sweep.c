/* Runs a sweep cell by cell: build the prompt, capture the trace, analyse it
 * with the sweep's analysis settings, append the cell's rows to the summary.
 * The model is loaded once by the caller; each cell has its own runtime (the
 * context differs). A failing cell stops the sweep and leaves no summary. */
#include "sweep/capture_sweep.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"

/* RULER-strict: the answer, trimmed of leading spaces, begins with the value
 * (every value in turn for several, in any order, separated by anything). */
static int answer_exact(const NiahPrompt *prompt, const char *answer) {
  while (isspace((unsigned char)*answer)) answer++;
  if (prompt->n_answers == 1)
    return !strncmp(answer, prompt->answers[0], strlen(prompt->answers[0]));
  return niah_answer_found(prompt, answer);
}

/* Mean over heads of a (n_heads, OBC_Q_COUNT, n_windows, n_recents, n_topk)
 * array at (q, w, r = 0, k); NaN when the array is absent. */
static double head_mean(const double *values, const AnalysisResult *result,
                        const AnalysisConfig *config, size_t q, size_t w, size_t k) {
  if (!values) return NAN;
  double sum = 0;
  for (size_t h = 0; h < result->n_heads; h++)
    sum += values[analysis_recall_index(result, config, h, q, w, 0, k)];
  return sum / (double)result->n_heads;
}

static size_t index_of(const size_t *values, size_t n, size_t value) {
  for (size_t i = 0; i < n; i++)
    if (values[i] == value) return i;
  return 0;
}

/* Analyses one trace into cell_dir and appends its summary rows. */
static int analyse_cell(const SweepOptions *o, const char *trace_path, const char *cell_dir,
                        const NiahPrompt *prompt, const CaptureResult *captured, size_t length,
                        size_t depth, FILE *summary) {
  TraceReader *reader = NULL;
  int rc = trace_open(trace_path, &reader);
  if (rc) return rc;
  const TraceMeta *meta = trace_meta(reader);
  AnalysisConfig config = o->analysis;
  AnalysisResult result;
  memset(&result, 0, sizeof result);
  rc = analysis_config_resolve(&config, meta);
  if (!rc) rc = obc_make_dirs(cell_dir);
  if (!rc) rc = analysis_run(reader, &config, false, &result);
  if (!rc)
    rc = analysis_write_outputs(cell_dir, trace_path, meta, &config, &result, o->command_line);
  if (!rc) {
    size_t w = index_of(config.windows, config.n_windows, config.main_window);
    size_t k = index_of(config.topk, config.n_topk, config.main_k);
    int exact = answer_exact(prompt, captured->generated_text);
    printf("length %5zu depth %3zu: answer \"%s\" -> needle %s; recall@%zu at W=%zu:", length,
           depth, captured->generated_text, captured->needle_found ? "found" : "not found",
           config.main_k, config.main_window);
    for (size_t q = 0; q < OBC_Q_COUNT; q++) {
      double recall = head_mean(result.recall, &result, &config, q, w, k);
      double kept = head_mean(result.needle, &result, &config, q, w, k);
      fprintf(summary, "%zu,%zu,%s,%d,%d,%s,%zu,%.6f,%.6f\n", length, depth, prompt->answers[0],
              captured->needle_found, exact, score_quantity_name((ScoreQuantity)q), config.main_k,
              recall, kept);
      if (q == OBC_Q_ATTN || q == OBC_Q_OBC_VK || q == OBC_Q_REMOVE)
        printf(" %s %.3f", score_quantity_name((ScoreQuantity)q), recall);
    }
    printf("\n");
    fflush(stdout);
  }
  analysis_result_free(&result);
  trace_close(reader);
  return rc;
}

static int run_cell(const Model *model, const SweepOptions *o, const char *dir, size_t length,
                    size_t depth, FILE *summary) {
  NiahOptions niah = o->niah;
  niah.length = length;
  niah.depth = (double)depth;
  char trace_path[4096], cell_dir[4096], producer[1024];
  snprintf(trace_path, sizeof trace_path, "%s/L%zu_D%zu.h5", dir, length, depth);
  snprintf(cell_dir, sizeof cell_dir, "%s/L%zu_D%zu", dir, length, depth);
  snprintf(producer, sizeof producer, "%s [cell --length %zu --depth %zu]",
           o->command_line ? o->command_line : "obcache sweep", length, depth);
  CaptureOptions capture = o->capture;
  capture.producer = producer;
  NiahPrompt prompt;
  CaptureResult captured;
  int rc = niah_build(model->tokenizer, &niah, &prompt);
  if (!rc) rc = capture_run(model, &prompt, &capture, trace_path, &captured);
  if (!rc) rc = analyse_cell(o, trace_path, cell_dir, &prompt, &captured, length, depth, summary);
  if (rc) obc_fail_context(rc, "cell --length %zu --depth %zu", length, depth);
  niah_prompt_free(&prompt);
  return rc;
}

int sweep_run(const Model *model, const SweepOptions *o, const char *dir) {
  if (!o->n_lengths || !o->n_depths)
    return obc_fail(OBC_EINVAL, "sweep: empty grid (give --lengths and --depths)");
  for (size_t i = 0; i < o->n_depths; i++)
    if (o->depths[i] > 100)
      return obc_fail(OBC_EINVAL, "--depths: %zu is outside 0..100", o->depths[i]);
  size_t context = model->config.context_length;
  for (size_t i = 0; i < o->n_lengths; i++)
    if (context && o->lengths[i] + o->capture.decode > context)
      return obc_fail(OBC_EINVAL, "--lengths: %zu + --decode %zu is beyond %s's context of %zu",
                      o->lengths[i], o->capture.decode, model->config.name, context);
  int rc = obc_make_dirs(dir);
  if (rc) return rc;
  ObcPendingFile pending;
  FILE *summary = NULL;
  rc = obc_text_open_in(&pending, dir, "summary.csv", &summary);
  if (rc) return rc;
  fprintf(summary, "length,depth,needle,found,answer_ok,score,k,recall,needle_kept\n");
  for (size_t i = 0; !rc && i < o->n_lengths; i++)
    for (size_t j = 0; !rc && j < o->n_depths; j++)
      rc = run_cell(model, o, dir, o->lengths[i], o->depths[j], summary);
  int close_rc = obc_text_close(&pending, summary, rc == 0);
  return rc ? rc : close_rc;
}
