/* Offline replay: streams the trace one (layer, KV head) at a time and
 * evaluates the exact set-eviction output of every captured decode row of
 * its query heads (replay/offline.h); then the CSV and JSON outputs. */
#include "replay/offline.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scores/score_head.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_json.h"
#include "oracle/oracle.h"

void replay_offline_result_free(ReplayOfflineResult *r) {
  free(r->rel_error);
  free(r->mass_lost);
  free(r->sq_error);
  free(r->needle_kept);
  memset(r, 0, sizeof *r);
}

int replay_offline_run(TraceReader *reader, const EvictKeepSet *keep, ReplayOfflineResult *out) {
  const TraceMeta *meta = trace_meta(reader);
  memset(out, 0, sizeof *out);
  size_t first = 0, T = trace_meta_decode_rows(meta, &first);
  if (T == 0)
    return obc_fail(OBC_EINVAL,
                    "%s: no decode rows captured (offline replay needs them; hint: "
                    "capture with --decode >= 1)",
                    trace_path(reader));
  size_t L = meta->model.n_layers, H = meta->model.n_heads, G = meta->model.n_kv_heads;
  size_t group = H / G, d = meta->model.head_dim, s = meta->n_prompt;
  assert(keep->n_layers == L && keep->n_kv_heads == G && keep->n_prompt == s);
  int rc = replay_offline_result_alloc(out, meta, T);
  unsigned char *mask = obc_malloc(meta->n_positions, "keep mask");
  double *o_new = obc_malloc(d * sizeof(double), "replayed output");
  ScoreHead h;
  memset(&h, 0, sizeof h);
  if (!rc) rc = mask && o_new ? score_head_alloc(&h, reader) : OBC_ENOMEM;
  for (size_t l = 0; l < L && !rc; l++) {
    for (size_t g = 0; g < G && !rc; g++) {
      if ((rc = score_head_read(&h, reader, l, g))) break;
      memcpy(mask, keep->keep + (l * G + g) * s, s);
      memset(mask + s, 1, meta->n_positions - s); /* generated tokens stay */
      replay_offline_needle(out, meta, mask, l, g);
      for (size_t j = 0; j < group && !rc; j++) {
        size_t head = g * group + j;
        for (size_t t = 0; t < T && !rc; t++) {
          size_t r = first + t;
          double lost = 0.0;
          rc = oracle_set_eviction_output(&h.data, j, r, mask, o_new, &lost);
          replay_offline_record(out, l, g, head, t, o_new, h.O + (j * meta->n_rows + r) * d, d,
                                lost);
        }
      }
    }
  }
  score_head_free(&h);
  free(mask);
  free(o_new);
  if (rc) replay_offline_result_free(out);
  return rc;
}

int replay_offline_result_alloc(ReplayOfflineResult *out, const TraceMeta *meta, size_t T) {
  size_t L = meta->model.n_layers, H = meta->model.n_heads, G = meta->model.n_kv_heads;
  memset(out, 0, sizeof *out);
  out->n_layers = L;
  out->n_heads = H;
  out->n_kv_heads = G;
  out->n_steps = T;
  out->rel_error = obc_malloc(L * H * T * sizeof(double), "relative errors");
  out->mass_lost = obc_malloc(L * H * T * sizeof(double), "mass lost");
  out->sq_error = obc_calloc(L * G * T, sizeof(double), "squared errors");
  out->needle_kept = obc_malloc(L * G * sizeof(double), "needle retention");
  return out->rel_error && out->mass_lost && out->sq_error && out->needle_kept ? OBC_OK
                                                                               : OBC_ENOMEM;
}

void replay_offline_needle(ReplayOfflineResult *out, const TraceMeta *meta,
                           const unsigned char *keep, size_t l, size_t g) {
  const TraceSpan *needle = trace_meta_find_span(meta, "needle");
  size_t s = meta->n_prompt, nb = 0, ne = 0, kept = 0;
  out->has_needle = needle && needle->begin >= 0 && needle->end > needle->begin;
  if (out->has_needle) {
    nb = (size_t)needle->begin;
    ne = needle->end > (int64_t)s ? s : (size_t)needle->end;
  }
  for (size_t p = nb; p < ne; p++) kept += keep[p];
  out->needle_kept[l * out->n_kv_heads + g] =
      out->has_needle && ne > nb ? (double)kept / (ne - nb) : NAN;
}

void replay_offline_record(ReplayOfflineResult *out, size_t l, size_t g, size_t head, size_t t,
                           const double *o_new, const double *o, size_t d, double lost) {
  size_t H = out->n_heads, G = out->n_kv_heads, T = out->n_steps;
  double diff = 0.0, norm = 0.0;
  for (size_t c = 0; c < d; c++) {
    diff += (o_new[c] - o[c]) * (o_new[c] - o[c]);
    norm += o[c] * o[c];
  }
  out->rel_error[(l * H + head) * T + t] = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
  out->mass_lost[(l * H + head) * T + t] = lost;
  out->sq_error[(l * G + g) * T + t] += diff;
}

void replay_offline_summarise(const ReplayOfflineResult *r, ReplayOfflineSummary *s) {
  size_t n = r->n_layers * r->n_heads, T = r->n_steps;
  memset(s, 0, sizeof *s);
  for (size_t i = 0; i < n; i++) {
    s->rel_error_step1 += r->rel_error[i * T] / n;
    for (size_t t = 0; t < T; t++) {
      s->rel_error += r->rel_error[i * T + t] / (n * T);
      s->mass_lost += r->mass_lost[i * T + t] / (n * T);
    }
  }
  size_t nk = r->n_layers * r->n_kv_heads;
  s->needle_kept = r->has_needle ? 0.0 : NAN;
  for (size_t i = 0; r->has_needle && i < nk; i++) s->needle_kept += r->needle_kept[i] / nk;
}

static int write_heads_csv(ObcOutputSet *set, const ReplayOfflineResult *r) {
  FILE *fp = NULL;
  int rc = obc_output_open(set, "offline_heads.csv", &fp);
  if (rc) return rc;
  size_t T = r->n_steps, group = r->n_heads / r->n_kv_heads;
  fprintf(fp, "layer,head,kv_head,rel_error,rel_error_step1,mass_lost,needle_kept\n");
  for (size_t l = 0; l < r->n_layers; l++)
    for (size_t h = 0; h < r->n_heads; h++) {
      const double *e = r->rel_error + (l * r->n_heads + h) * T;
      const double *m = r->mass_lost + (l * r->n_heads + h) * T;
      double err = 0.0, mass = 0.0;
      for (size_t t = 0; t < T; t++) err += e[t] / T, mass += m[t] / T;
      fprintf(fp, "%zu,%zu,%zu,%.9g,%.9g,%.9g,%.6g\n", l, h, h / group, err, e[0], mass,
              r->needle_kept[l * r->n_kv_heads + h / group]);
    }
  return obc_output_close(set, fp);
}

static int write_layers_csv(ObcOutputSet *set, const ReplayOfflineResult *r) {
  FILE *fp = NULL;
  int rc = obc_output_open(set, "offline_layers.csv", &fp);
  if (rc) return rc;
  size_t T = r->n_steps, H = r->n_heads, G = r->n_kv_heads;
  fprintf(fp, "layer,rel_error,rel_error_step1,mass_lost,needle_kept\n");
  for (size_t l = 0; l < r->n_layers; l++) {
    double err = 0.0, err1 = 0.0, mass = 0.0, needle = 0.0;
    for (size_t h = 0; h < H; h++) {
      err1 += r->rel_error[(l * H + h) * T] / H;
      for (size_t t = 0; t < T; t++) {
        err += r->rel_error[(l * H + h) * T + t] / (H * T);
        mass += r->mass_lost[(l * H + h) * T + t] / (H * T);
      }
    }
    for (size_t g = 0; g < G; g++) needle += r->needle_kept[l * G + g] / G;
    fprintf(fp, "%zu,%.9g,%.9g,%.9g,%.6g\n", l, err, err1, mass, needle);
  }
  return obc_output_close(set, fp);
}

static int write_steps_csv(ObcOutputSet *set, const ReplayOfflineResult *r) {
  FILE *fp = NULL;
  int rc = obc_output_open(set, "offline_steps.csv", &fp);
  if (rc) return rc;
  size_t T = r->n_steps, n = r->n_layers * r->n_heads;
  fprintf(fp, "step,rel_error,mass_lost\n");
  for (size_t t = 0; t < T; t++) {
    double err = 0.0, mass = 0.0;
    for (size_t i = 0; i < n; i++)
      err += r->rel_error[i * T + t] / n, mass += r->mass_lost[i * T + t] / n;
    fprintf(fp, "%zu,%.9g,%.9g\n", t + 1, err, mass);
  }
  return obc_output_close(set, fp);
}

cJSON *replay_policy_json(const EvictKeepSet *keep) {
  const EvictPolicy *p = &keep->policy;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "score", p->score);
  cJSON_AddStringToObject(j, "budget_given", p->budget_text);
  cJSON_AddStringToObject(j, "budget_rule", evict_budget_rule_name(p->budget_rule));
  cJSON_AddNumberToObject(j, "budget", (double)keep->budget);
  cJSON_AddNumberToObject(j, "candidates", (double)keep->n_candidates);
  cJSON_AddNumberToObject(j, "window", (double)keep->window);
  cJSON_AddNumberToObject(j, "recent", (double)p->recent);
  cJSON_AddNumberToObject(j, "sinks", (double)p->sinks);
  cJSON_AddStringToObject(j, "allocation", evict_allocation_name(p->allocation));
  cJSON_AddStringToObject(j, "protocol", evict_protocol_name(p->protocol));
  char protect[EVICT_MAX_PROTECT * 64];
  evict_policy_protect_text(p, protect, sizeof protect);
  cJSON_AddStringToObject(j, "protect", protect);
  cJSON_AddStringToObject(j, "protect_budget", EVICT_PROTECT_BUDGET);
  cJSON_AddNumberToObject(j, "seed", (double)p->seed);
  return j;
}

static cJSON *json_number(double v) {
  return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

/* The four files of the set, in order. */
static int write_offline_files(ObcOutputSet *set, const char *trace_path, const EvictKeepSet *keep,
                               const ReplayOfflineResult *r, const char *command_line) {
  int rc = write_heads_csv(set, r);
  if (!rc) rc = write_layers_csv(set, r);
  if (!rc) rc = write_steps_csv(set, r);
  if (rc) return rc;
  ReplayOfflineSummary s;
  replay_offline_summarise(r, &s);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "tool_version", OBC_VERSION);
  cJSON_AddStringToObject(root, "command_line", command_line ? command_line : "");
  cJSON_AddStringToObject(root, "trace", trace_path);
  cJSON_AddItemToObject(root, "policy", replay_policy_json(keep));
  cJSON_AddNumberToObject(root, "decode_steps", (double)r->n_steps);
  cJSON *m = cJSON_AddObjectToObject(root, "overall");
  cJSON_AddItemToObject(m, "rel_error", json_number(s.rel_error));
  cJSON_AddItemToObject(m, "rel_error_step1", json_number(s.rel_error_step1));
  cJSON_AddItemToObject(m, "mass_lost", json_number(s.mass_lost));
  cJSON_AddItemToObject(m, "needle_kept", json_number(s.needle_kept));
  return obc_output_json(set, "offline.json", root);
}

int replay_offline_write(const char *dir, const char *trace_path, const EvictKeepSet *keep,
                         const ReplayOfflineResult *r, const char *command_line) {
  ObcOutputSet set;
  int rc = obc_output_begin(&set, dir);
  if (!rc) rc = write_offline_files(&set, trace_path, keep, r, command_line);
  return obc_output_end(&set, rc);
}
