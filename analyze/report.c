/* The files of the analysis folder (the contract of the plotting step):
 * report.json (cJSON; the trace, every parameter, a summary and the file
 * list), recall.csv, recall_layers.csv, recall_heads.csv, spearman.csv,
 * needle.csv, bias.csv and taylor.csv: one output set (common/obc_file.h),
 * so a failed run leaves none of them. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze/analysis.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_json.h"

/* Mean, min and max of the non-NaN values at base + i * stride (count);
 * NaN when none is defined. Returns the number of defined values. */
static size_t summarise(const double *base, size_t count, size_t stride, double *mean, double *lo,
                        double *hi) {
  double sum = 0.0;
  size_t n = 0;
  *lo = INFINITY;
  *hi = -INFINITY;
  for (size_t i = 0; i < count; i++) {
    double v = base[i * stride];
    if (isnan(v)) continue;
    sum += v;
    n++;
    if (v < *lo) *lo = v;
    if (v > *hi) *hi = v;
  }
  if (n == 0)
    *mean = *lo = *hi = NAN;
  else
    *mean = sum / (double)n;
  return n;
}

/* Stride between heads in the recall-shaped arrays. */
static size_t recall_head_stride(const AnalysisConfig *config, const AnalysisResult *result) {
  return OBC_Q_COUNT * config->n_windows * result->n_recents * config->n_topk;
}

/* Mean, min and max over heads of a file score's recall. */
static size_t summarise_file(const AnalysisConfig *config, const AnalysisResult *result, size_t ref,
                             size_t f, size_t ri, size_t ki, double *mean, double *lo, double *hi) {
  size_t at = analysis_file_recall_index(result, config, ref, 0, f, ri, ki);
  size_t stride = config->n_file_scores * result->n_recents * config->n_topk;
  return summarise(result->file_recall + at, result->n_heads, stride, mean, lo, hi);
}

static int write_recall_files(ObcOutputSet *set, const AnalysisConfig *config,
                              const AnalysisResult *result) {
  FILE *all, *layers, *heads;
  int rc = obc_output_open(set, "recall.csv", &all);
  if (rc) return rc;
  fprintf(all, "score,window,recent,k,reference,recall_mean,recall_min,recall_max\n");
  size_t stride = recall_head_stride(config, result);
  for (size_t ref = 0; ref < result->n_references; ref++)
    for (size_t q = 0; q < OBC_Q_COUNT; q++)
      for (size_t w = 0; w < config->n_windows; w++)
        for (size_t ri = 0; ri < result->n_recents; ri++)
          for (size_t ki = 0; ki < config->n_topk; ki++) {
            size_t at = ref * analysis_recall_stride(result, config) +
                        analysis_recall_index(result, config, 0, q, w, ri, ki);
            double mean, lo, hi;
            if (!summarise(result->recall + at, result->n_heads, stride, &mean, &lo, &hi)) continue;
            fprintf(all, "%s,%zu,%zu,%zu,%s,%.9g,%.9g,%.9g\n",
                    score_quantity_name((ScoreQuantity)q), config->windows[w], result->recents[ri],
                    config->topk[ki], result->reference_names[ref], mean, lo, hi);
          }
  for (size_t ref = 0; ref < result->n_references; ref++) /* files: no window (0) */
    for (size_t f = 0; f < config->n_file_scores; f++)
      for (size_t ri = 0; ri < result->n_recents; ri++)
        for (size_t ki = 0; ki < config->n_topk; ki++) {
          double mean, lo, hi;
          if (!summarise_file(config, result, ref, f, ri, ki, &mean, &lo, &hi)) continue;
          fprintf(all, "%s,0,%zu,%zu,%s,%.9g,%.9g,%.9g\n", config->file_scores[f].name,
                  result->recents[ri], config->topk[ki], result->reference_names[ref], mean, lo,
                  hi);
        }
  if ((rc = obc_output_close(set, all))) return rc;

  if ((rc = obc_output_open(set, "recall_layers.csv", &layers))) return rc;
  fprintf(layers, "score,window,recent,k,layer,recall\n");
  for (size_t q = 0; q < OBC_Q_COUNT; q++)
    for (size_t w = 0; w < config->n_windows; w++)
      for (size_t ri = 0; ri < result->n_recents; ri++)
        for (size_t ki = 0; ki < config->n_topk; ki++)
          for (size_t layer = 0; layer < result->n_layers; layer++) {
            size_t head0 = layer * result->n_kv_heads;
            size_t at = analysis_recall_index(result, config, head0, q, w, ri, ki);
            double mean, lo, hi;
            if (!summarise(result->recall + at, result->n_kv_heads, stride, &mean, &lo, &hi))
              continue;
            fprintf(layers, "%s,%zu,%zu,%zu,%zu,%.9g\n", score_quantity_name((ScoreQuantity)q),
                    config->windows[w], result->recents[ri], config->topk[ki], layer, mean);
          }
  if ((rc = obc_output_close(set, layers))) return rc;

  if ((rc = obc_output_open(set, "recall_heads.csv", &heads))) return rc;
  fprintf(heads, "score,window,recent,k,layer,kv_head,recall\n");
  for (size_t q = 0; q < OBC_Q_COUNT; q++)
    for (size_t w = 0; w < config->n_windows; w++)
      for (size_t ri = 0; ri < result->n_recents; ri++)
        for (size_t ki = 0; ki < config->n_topk; ki++)
          for (size_t head = 0; head < result->n_heads; head++) {
            double v = result->recall[analysis_recall_index(result, config, head, q, w, ri, ki)];
            if (isnan(v)) continue;
            fprintf(heads, "%s,%zu,%zu,%zu,%zu,%zu,%.9g\n", score_quantity_name((ScoreQuantity)q),
                    config->windows[w], result->recents[ri], config->topk[ki],
                    head / result->n_kv_heads, head % result->n_kv_heads, v);
          }
  return obc_output_close(set, heads);
}

static int write_spearman_file(ObcOutputSet *set, const AnalysisConfig *config,
                               const AnalysisResult *result) {
  FILE *fp;
  int rc = obc_output_open(set, "spearman.csv", &fp);
  if (rc) return rc;
  fprintf(fp, "score,window,reference,rho_mean,rho_min,rho_max\n");
  size_t stride = result->n_pairs * config->n_windows;
  for (size_t pi = 0; pi < result->n_pairs; pi++)
    for (size_t w = 0; w < config->n_windows; w++) {
      double mean, lo, hi;
      summarise(result->spearman + pi * config->n_windows + w, result->n_heads, stride, &mean, &lo,
                &hi);
      fprintf(fp, "%s,%zu,%s,%.9g,%.9g,%.9g\n", score_quantity_name(result->pairs[pi].quantity),
              config->windows[w], analysis_reference_name(result, result->pairs[pi].reference),
              mean, lo, hi);
    }
  return obc_output_close(set, fp);
}

static int write_needle_file(ObcOutputSet *set, const AnalysisConfig *config,
                             const AnalysisResult *result) {
  FILE *fp;
  int rc = obc_output_open(set, "needle.csv", &fp);
  if (rc) return rc;
  fprintf(fp, "score,window,recent,k,retention\n");
  size_t stride = recall_head_stride(config, result);
  for (size_t q = 0; q < OBC_Q_COUNT; q++)
    for (size_t w = 0; w < config->n_windows; w++)
      for (size_t ri = 0; ri < result->n_recents; ri++)
        for (size_t ki = 0; ki < config->n_topk; ki++) {
          size_t at = analysis_recall_index(result, config, 0, q, w, ri, ki);
          double mean, lo, hi;
          if (!summarise(result->needle + at, result->n_heads, stride, &mean, &lo, &hi)) continue;
          fprintf(fp, "%s,%zu,%zu,%zu,%.9g\n", score_quantity_name((ScoreQuantity)q),
                  config->windows[w], result->recents[ri], config->topk[ki], mean);
        }
  return obc_output_close(set, fp);
}


static int write_bias_file(ObcOutputSet *set, const AnalysisConfig *config,
                           const AnalysisResult *result) {
  FILE *fp;
  int rc = obc_output_open(set, "bias.csv", &fp);
  if (rc) return rc;
  fprintf(fp, "score,window,recent,k,bucket,bucket_lo,bucket_hi,selected_share,mean_norm_score\n");
  size_t B = config->buckets;
  for (size_t q = 0; q <= OBC_Q_COUNT; q++) {
    const char *name =
        q == OBC_Q_COUNT ? result->reference_names[0] : score_quantity_name((ScoreQuantity)q);
    for (size_t w = 0; w < config->n_windows; w++)
      for (size_t ri = 0; ri < result->n_recents; ri++)
        for (size_t ki = 0; ki < config->n_topk; ki++) {
          /* The oracle has no recent window: its rows exist for every k. */
          if (q < OBC_Q_COUNT && config->topk[ki] <= result->recents[ri]) continue;
          const double *share =
              result->bias_share +
              (((q * config->n_windows + w) * result->n_recents + ri) * config->n_topk + ki) * B;
          const double *norm = result->bias_norm + (q * config->n_windows + w) * B;
          for (size_t b = 0; b < B; b++)
            fprintf(fp, "%s,%zu,%zu,%zu,%zu,%.9g,%.9g,%.9g,%.9g\n", name, config->windows[w],
                    result->recents[ri], config->topk[ki], b, (double)b / (double)B,
                    (double)(b + 1) / (double)B, share[b], norm[b]);
        }
  }
  return obc_output_close(set, fp);
}

static int write_taylor_file(ObcOutputSet *set, const AnalysisResult *result) {
  FILE *fp;
  int rc = obc_output_open(set, "taylor.csv", &fp);
  if (rc) return rc;
  fprintf(fp, "layer,kv_head,position,exact_v,obc_v,exact_k,obc_k,exact_vk,obc_vk,remove,oracle\n");
  for (size_t i = 0; i < result->n_taylor; i++) {
    const AnalysisTaylorPoint *t = &result->taylor[i];
    fprintf(fp, "%zu,%zu,%zu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", t->layer, t->kv_head,
            t->position, t->exact_v, t->obc_v, t->exact_k, t->obc_k, t->exact_vk, t->obc_vk,
            t->remove, t->oracle);
  }
  return obc_output_close(set, fp);
}

static cJSON *size_array(const size_t *values, size_t n) {
  cJSON *array = cJSON_CreateArray();
  for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(array, cJSON_CreateNumber((double)values[i]));
  return array;
}

static cJSON *trace_json(const char *trace_path, const TraceMeta *meta) {
  cJSON *t = cJSON_CreateObject();
  cJSON_AddStringToObject(t, "path", trace_path);
  cJSON_AddStringToObject(t, "producer", meta->producer);
  cJSON_AddStringToObject(t, "created", meta->created);
  cJSON_AddStringToObject(t, "tool_version", meta->tool_version);
  cJSON_AddStringToObject(t, "dtype", meta->dtype);
  cJSON_AddStringToObject(t, "model", meta->model.name);
  cJSON_AddStringToObject(t, "architecture", meta->model.architecture);
  cJSON_AddNumberToObject(t, "n_layers", (double)meta->model.n_layers);
  cJSON_AddNumberToObject(t, "n_heads", (double)meta->model.n_heads);
  cJSON_AddNumberToObject(t, "n_kv_heads", (double)meta->model.n_kv_heads);
  cJSON_AddNumberToObject(t, "head_dim", (double)meta->model.head_dim);
  cJSON_AddNumberToObject(t, "n_prompt", (double)meta->n_prompt);
  cJSON_AddNumberToObject(t, "n_decode", (double)meta->n_decode);
  cJSON_AddNumberToObject(t, "n_rows", (double)meta->n_rows);
  cJSON_AddNumberToObject(t, "window_rows", (double)trace_meta_window_rows(meta));
  size_t first = 0;
  cJSON_AddNumberToObject(t, "decode_rows", (double)trace_meta_decode_rows(meta, &first));
  cJSON_AddNumberToObject(t, "needle_found", meta->needle_found);
  cJSON *spans = cJSON_AddObjectToObject(t, "spans");
  for (size_t i = 0; i < meta->n_spans; i++) {
    cJSON *span = cJSON_CreateArray();
    cJSON_AddItemToArray(span, cJSON_CreateNumber((double)meta->spans[i].begin));
    cJSON_AddItemToArray(span, cJSON_CreateNumber((double)meta->spans[i].end));
    cJSON_AddItemToObject(spans, meta->spans[i].name, span);
  }
  const TraceSpan *needle = trace_meta_find_span(meta, "needle");
  if (needle)
    cJSON_AddItemToObject(t, "needle", cJSON_Duplicate(cJSON_GetObjectItem(spans, "needle"), 1));
  return t;
}

static cJSON *parameters_json(const AnalysisConfig *config, const AnalysisResult *result) {
  cJSON *p = cJSON_CreateObject();
  cJSON_AddItemToObject(p, "windows", size_array(config->windows, config->n_windows));
  cJSON_AddNumberToObject(p, "main_window", (double)config->main_window);
  cJSON_AddItemToObject(p, "topk", size_array(config->topk, config->n_topk));
  cJSON_AddNumberToObject(p, "main_k", (double)config->main_k);
  cJSON_AddItemToObject(p, "recent", size_array(result->recents, result->n_recents));
  cJSON_AddStringToObject(p, "oracle", result->reference_names[0]);
  cJSON_AddNumberToObject(p, "oracle_steps", (double)result->oracle_steps);
  cJSON *references = cJSON_AddArrayToObject(p, "references");
  for (size_t ref = 0; ref < result->n_references; ref++)
    cJSON_AddItemToArray(references, cJSON_CreateString(result->reference_names[ref]));
  ScoreGqa a = config->score_options.aggregation;
  cJSON_AddStringToObject(p, "gqa", a == OBC_GQA_MEAN ? "mean" : a == OBC_GQA_MAX ? "max" : "sum");
  cJSON_AddNumberToObject(p, "maxpool_kernel", (double)config->score_options.maxpool_kernel);
  cJSON_AddNumberToObject(p, "buckets", (double)config->buckets);
  cJSON_AddStringToObject(
      p, "precision", config->score_options.precision == OBC_PRECISION_DOUBLE ? "double" : "float");
  cJSON_AddNumberToObject(p, "taylor_points", (double)config->taylor_points);
  cJSON_AddNumberToObject(p, "threads", (double)config->threads);
  if (config->scores_out) cJSON_AddStringToObject(p, "scores_out", config->scores_out);
  return p;
}

/* Mean over heads of one recall cell against reference ref (NaN when not
 * reported). */
static double mean_recall(const AnalysisConfig *config, const AnalysisResult *result, size_t ref,
                          size_t q, size_t w, size_t ri, size_t ki) {
  double mean, lo, hi;
  summarise(result->recall + ref * analysis_recall_stride(result, config) +
                analysis_recall_index(result, config, 0, q, w, ri, ki),
            result->n_heads, recall_head_stride(config, result), &mean, &lo, &hi);
  return mean;
}

static double mean_spearman(const AnalysisConfig *config, const AnalysisResult *result, size_t q,
                            int reference, size_t w) {
  for (size_t pi = 0; pi < result->n_pairs; pi++) {
    if (result->pairs[pi].quantity != q || result->pairs[pi].reference != reference) continue;
    double mean, lo, hi;
    summarise(result->spearman + pi * config->n_windows + w, result->n_heads,
              result->n_pairs * config->n_windows, &mean, &lo, &hi);
    return mean;
  }
  return NAN;
}

static size_t window_index(const AnalysisConfig *config, size_t window) {
  for (size_t w = 0; w < config->n_windows; w++)
    if (config->windows[w] == window) return w;
  return 0;
}

/* The mean recall of one (recent, k) cell of row i (a quantity at window
 * w, or a file score) against reference ref; NaN when not reported. */
typedef double (*RecallMean)(const AnalysisConfig *config, const AnalysisResult *result, size_t ref,
                             size_t i, size_t w, size_t ri, size_t ki);

/* mean_recall's twin for file score f (no window). */
static double file_mean_recall(const AnalysisConfig *config, const AnalysisResult *result,
                               size_t ref, size_t f, size_t w, size_t ri, size_t ki) {
  (void)w;
  double mean, lo, hi;
  return summarise_file(config, result, ref, f, ri, ki, &mean, &lo, &hi) ? mean : NAN;
}

/* {"recent=R": {"k": recall}} of row i at window w against reference ref. */
static cJSON *recall_json(const AnalysisConfig *config, const AnalysisResult *result, size_t ref,
                          size_t i, size_t w, RecallMean mean) {
  cJSON *recall = cJSON_CreateObject();
  for (size_t ri = 0; ri < result->n_recents; ri++) {
    char key[32];
    snprintf(key, sizeof key, "recent=%zu", result->recents[ri]);
    cJSON *by_k = cJSON_AddObjectToObject(recall, key);
    for (size_t ki = 0; ki < config->n_topk; ki++) {
      double v = mean(config, result, ref, i, w, ri, ki);
      if (isnan(v)) continue;
      snprintf(key, sizeof key, "%zu", config->topk[ki]);
      cJSON_AddNumberToObject(by_k, key, v);
    }
  }
  return recall;
}

/* Per score: recall and Spearman against the main reference (--oracle), the
 * same against every reference (recall_by_reference, spearman_by_reference)
 * and the Taylor score's Spearman with its exact error. */
static cJSON *summary_json(const AnalysisConfig *config, const AnalysisResult *result) {
  cJSON *summary = cJSON_CreateObject();
  size_t w = window_index(config, config->main_window);
  cJSON_AddNumberToObject(summary, "window", (double)config->main_window);
  cJSON_AddStringToObject(summary, "reference", result->reference_names[0]);
  cJSON *scores = cJSON_AddObjectToObject(summary, "scores");
  for (size_t q = 0; q < OBC_Q_COUNT; q++) {
    cJSON *entry = cJSON_AddObjectToObject(scores, score_quantity_name((ScoreQuantity)q));
    cJSON_AddItemToObject(entry, "recall", recall_json(config, result, 0, q, w, mean_recall));
    double rho = mean_spearman(config, result, q, OBC_REF_ORACLE(0), w);
    if (!isnan(rho)) cJSON_AddNumberToObject(entry, "spearman_oracle", rho);
    cJSON *by_ref = cJSON_AddObjectToObject(entry, "recall_by_reference");
    cJSON *rho_by_ref = cJSON_AddObjectToObject(entry, "spearman_by_reference");
    for (size_t ref = 0; ref < result->n_references; ref++) {
      cJSON_AddItemToObject(by_ref, result->reference_names[ref],
                            recall_json(config, result, ref, q, w, mean_recall));
      rho = mean_spearman(config, result, q, OBC_REF_ORACLE(ref), w);
      if (!isnan(rho)) cJSON_AddNumberToObject(rho_by_ref, result->reference_names[ref], rho);
    }
    for (size_t pi = 0; pi < result->n_pairs; pi++)
      if (result->pairs[pi].quantity == q && result->pairs[pi].reference >= 0) {
        double r2 = mean_spearman(config, result, q, result->pairs[pi].reference, w);
        if (!isnan(r2)) cJSON_AddNumberToObject(entry, "spearman_exact", r2);
      }
  }
  for (size_t f = 0; f < config->n_file_scores; f++) {
    const ScoresFileSpec *spec = &config->file_scores[f];
    cJSON *entry = cJSON_AddObjectToObject(scores, spec->name);
    cJSON_AddStringToObject(entry, "file", spec->path);
    if (*spec->dataset) cJSON_AddStringToObject(entry, "dataset", spec->dataset);
    cJSON_AddItemToObject(entry, "recall", recall_json(config, result, 0, f, 0, file_mean_recall));
    cJSON *by_ref = cJSON_AddObjectToObject(entry, "recall_by_reference");
    for (size_t ref = 0; ref < result->n_references; ref++)
      cJSON_AddItemToObject(by_ref, result->reference_names[ref],
                            recall_json(config, result, ref, f, 0, file_mean_recall));
  }
  return summary;
}

static void utc_now(char *out, size_t size) {
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int write_report_json(ObcOutputSet *set, const char *trace_path, const TraceMeta *meta,
                             const AnalysisConfig *config, const AnalysisResult *result,
                             const char *command_line) {
  char created[32];
  utc_now(created, sizeof created);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "schema", "obcache-analysis/1");
  cJSON_AddStringToObject(root, "tool_version", OBC_VERSION);
  cJSON_AddStringToObject(root, "created", created);
  cJSON_AddStringToObject(root, "command", command_line ? command_line : "");
  cJSON_AddItemToObject(root, "trace", trace_json(trace_path, meta));
  cJSON_AddItemToObject(root, "parameters", parameters_json(config, result));
  cJSON_AddItemToObject(root, "summary", summary_json(config, result));
  cJSON_AddNumberToObject(root, "seconds", result->seconds);
  cJSON *phases = cJSON_AddObjectToObject(root, "seconds_by_phase");
  cJSON_AddNumberToObject(phases, "read", result->seconds_read);
  cJSON_AddNumberToObject(phases, "sweep", result->seconds_sweep);
  cJSON_AddNumberToObject(phases, "oracle", result->seconds_oracle);
  cJSON_AddNumberToObject(phases, "reduce", result->seconds_reduce);
  cJSON *files = cJSON_AddArrayToObject(root, "files");
  for (size_t i = 0; i < set->count; i++)
    cJSON_AddItemToArray(files, cJSON_CreateString(obc_output_name(set, i)));
  if (config->scores_out) cJSON_AddItemToArray(files, cJSON_CreateString(config->scores_out));
  cJSON_AddItemToArray(files, cJSON_CreateString("report.json"));
  return obc_output_json(set, "report.json", root);
}

int analysis_write_outputs(const char *dir, const char *trace_path, const TraceMeta *meta,
                           const AnalysisConfig *config, const AnalysisResult *result,
                           const char *command_line) {
  ObcOutputSet set;
  int rc = obc_output_begin(&set, dir);
  if (!rc) rc = write_recall_files(&set, config, result);
  if (!rc) rc = write_spearman_file(&set, config, result);
  if (!rc && result->needle) rc = write_needle_file(&set, config, result);
  if (!rc) rc = write_bias_file(&set, config, result);
  if (!rc) rc = write_taylor_file(&set, result);
  if (!rc) rc = write_report_json(&set, trace_path, meta, config, result, command_line);
  return obc_output_end(&set, rc);
}

void analysis_print_summary(FILE *out, const char *trace_path, const TraceMeta *meta,
                            const AnalysisConfig *config, const AnalysisResult *result) {
  size_t w = window_index(config, config->main_window);
  size_t ki = 0;
  while (ki + 1 < config->n_topk && config->topk[ki] != config->main_k) ki++;
  fprintf(out, "%s: %s, %zu layers x %zu KV heads, s=%zu, %zu decode steps\n", trace_path,
          meta->model.name, meta->model.n_layers, meta->model.n_kv_heads, meta->n_prompt,
          meta->n_decode);
  fprintf(out, "recall@%zu of %s (mean over %zu heads), window W=%zu:\n", config->main_k,
          result->reference_names[0], result->n_heads, config->main_window);
  char recent_label[32];
  snprintf(recent_label, sizeof recent_label, "r=%zu",
           result->n_recents > 1 ? result->recents[1] : 0);
  fprintf(out, "  %-9s %8s", "score", "r=0");
  if (result->n_recents > 1) fprintf(out, " %8s", recent_label);
  fprintf(out, " %10s", "spearman");
  for (size_t ref = 1; ref < result->n_references; ref++)
    fprintf(out, " %14.14s", result->reference_names[ref]);
  fprintf(out, "\n");
  for (size_t q = 0; q < OBC_Q_COUNT; q++) {
    fprintf(out, "  %-9s %8.3f", score_quantity_name((ScoreQuantity)q),
            mean_recall(config, result, 0, q, w, 0, ki));
    if (result->n_recents > 1) fprintf(out, " %8.3f", mean_recall(config, result, 0, q, w, 1, ki));
    fprintf(out, " %10.3f", mean_spearman(config, result, q, OBC_REF_ORACLE(0), w));
    for (size_t ref = 1; ref < result->n_references; ref++)
      fprintf(out, " %14.3f", mean_recall(config, result, ref, q, w, 0, ki));
    fprintf(out, "\n");
  }
  for (size_t f = 0; f < config->n_file_scores; f++) { /* no window, no Spearman */
    double mean, lo, hi;
    summarise_file(config, result, 0, f, 0, ki, &mean, &lo, &hi);
    fprintf(out, "  %-9s %8.3f", config->file_scores[f].name, mean);
    if (result->n_recents > 1) {
      summarise_file(config, result, 0, f, 1, ki, &mean, &lo, &hi);
      fprintf(out, " %8.3f", mean);
    }
    fprintf(out, " %10s", "-");
    for (size_t ref = 1; ref < result->n_references; ref++) {
      summarise_file(config, result, ref, f, 0, ki, &mean, &lo, &hi);
      fprintf(out, " %14.3f", mean);
    }
    fprintf(out, "\n");
  }
}
