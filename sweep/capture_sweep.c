/* One cell of a sweep: build the prompt, capture the trace, analyse it with
 * the sweep's analysis settings, write the cell's summary rows. The model is
 * loaded once by the caller; each cell has its own runtime (the context
 * differs). Then the merge of the finished cells into DIR/summary.csv and
 * DIR/index.html. */
#include "sweep/capture_sweep.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_html.h"
#include "common/obc_json.h"
#include "formats/json_file.h"

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
