/* One cell of a sweep: build the prompt, capture the trace, analyse it with
 * the sweep's analysis settings, write the cell's summary rows. The model is
 * loaded once by the caller; each cell has its own runtime (the context
 * differs). */
#include "sweep/capture_sweep.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_json.h"

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

/* Analyses the cell's trace into out/analysis and writes out/rows.csv. */
static int analyse_cell(const SweepOptions *o, const char *out, const char *trace_path,
                        const NiahPrompt *prompt, const CaptureResult *captured,
                        const SweepPlanCell *cell) {
  TraceReader *reader = NULL;
  int rc = trace_open(trace_path, &reader);
  if (rc) return rc;
  const TraceMeta *meta = trace_meta(reader);
  AnalysisConfig config = o->analysis;
  AnalysisResult result;
  memset(&result, 0, sizeof result);
  char analysis_dir[4096];
  snprintf(analysis_dir, sizeof analysis_dir, "%s/analysis", out);
  rc = analysis_config_resolve(&config, meta);
  if (!rc) rc = obc_make_dirs(analysis_dir);
  if (!rc) rc = analysis_run(reader, &config, false, &result);
  if (!rc)
    rc = analysis_write_outputs(analysis_dir, trace_path, meta, &config, &result, o->command_line);
  ObcPendingFile pending;
  FILE *rows = NULL;
  if (!rc) rc = obc_text_open_in(&pending, out, "rows.csv", &rows);
  if (!rc) {
    size_t w = index_of(config.windows, config.n_windows, config.main_window);
    size_t k = index_of(config.topk, config.n_topk, config.main_k);
    int exact = answer_exact(prompt, captured->generated_text);
    printf("length %5zu depth %3zu: answer \"%s\" -> needle %s; recall@%zu at W=%zu:", cell->length,
           cell->depth, captured->generated_text, captured->needle_found ? "found" : "not found",
           config.main_k, config.main_window);
    for (size_t q = 0; q < OBC_Q_COUNT; q++) {
      double recall = head_mean(result.recall, &result, &config, q, w, k);
      double kept = head_mean(result.needle, &result, &config, q, w, k);
      fprintf(rows, "%zu,%zu,%s,%d,%d,%s,%zu,%.6f,%.6f\n", cell->length, cell->depth,
              prompt->answers[0], captured->needle_found, exact,
              score_quantity_name((ScoreQuantity)q), config.main_k, recall, kept);
      if (q == OBC_Q_ATTN || q == OBC_Q_OBC_VK || q == OBC_Q_REMOVE)
        printf(" %s %.3f", score_quantity_name((ScoreQuantity)q), recall);
    }
    printf("\n");
    fflush(stdout);
    rc = obc_text_close(&pending, rows, 1);
  }
  analysis_result_free(&result);
  trace_close(reader);
  return rc;
}

/* out/cell.json: what the index page shows of the cell. */
static int write_cell_json(const char *out, const SweepPlanCell *cell, const NiahPrompt *prompt,
                           const CaptureResult *captured) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "id", (double)cell->id);
  cJSON_AddStringToObject(root, "name", cell->name);
  cJSON_AddNumberToObject(root, "length", (double)cell->length);
  cJSON_AddNumberToObject(root, "depth", (double)cell->depth);
  cJSON_AddStringToObject(root, "needle", prompt->answers[0]);
  cJSON_AddStringToObject(root, "answer", captured->generated_text);
  cJSON_AddBoolToObject(root, "found", captured->needle_found);
  cJSON_AddBoolToObject(root, "answer_ok", answer_exact(prompt, captured->generated_text));
  return obc_json_write(out, "cell.json", root);
}

int sweep_run_cell(const Model *model, const SweepOptions *o, const SweepPlanCell *cell,
                   const char *out) {
  NiahOptions niah = o->niah;
  niah.length = cell->length;
  niah.depth = (double)cell->depth;
  char trace_path[4096], producer[1024];
  if (snprintf(trace_path, sizeof trace_path, "%s/trace.h5", out) >= (int)sizeof trace_path)
    return obc_fail(OBC_EINVAL, "%s: path too long", out);
  snprintf(producer, sizeof producer, "%s [cell %zu: --length %zu --depth %zu]",
           o->command_line ? o->command_line : "obcache sweep", cell->id, cell->length,
           cell->depth);
  CaptureOptions capture = o->capture;
  capture.producer = producer;
  NiahPrompt prompt;
  CaptureResult captured;
  int rc = niah_build(model->tokenizer, &niah, &prompt);
  if (rc)
    return obc_fail_context(rc, "cell %zu (--length %zu --depth %zu)", cell->id, cell->length,
                            cell->depth);
  rc = capture_run(model, &prompt, &capture, trace_path, &captured);
  if (!rc) rc = analyse_cell(o, out, trace_path, &prompt, &captured, cell);
  if (!rc) rc = write_cell_json(out, cell, &prompt, &captured);
  if (rc)
    obc_fail_context(rc, "cell %zu (--length %zu --depth %zu)", cell->id, cell->length,
                     cell->depth);
  niah_prompt_free(&prompt);
  return rc;
}

int sweep_run_cell_with(void *context, const SweepPlanCell *cell, const char *out) {
  const SweepModelOptions *m = context;
  return sweep_run_cell(m->model, m->options, cell, out);
}

int sweep_check_grid(const Model *model, const SweepOptions *o) {
  if (!o->n_lengths || !o->n_depths)
    return obc_fail(OBC_EINVAL, "sweep: empty grid (give --lengths and --depths)");
  for (size_t i = 0; i < o->n_depths; i++)
    if (o->depths[i] > 100)
      return obc_fail(OBC_EINVAL, "--depths: %zu is outside 0..100", o->depths[i]);
  size_t context = model ? model->config.context_length : 0;
  for (size_t i = 0; i < o->n_lengths; i++) {
    if (!o->lengths[i]) return obc_fail(OBC_EINVAL, "--lengths: 0 is not a prompt length");
    if (context && o->lengths[i] + o->capture.decode > context)
      return obc_fail(OBC_EINVAL, "--lengths: %zu + --decode %zu is beyond %s's context of %zu",
                      o->lengths[i], o->capture.decode, model->config.name, context);
  }
  return OBC_OK;
}
