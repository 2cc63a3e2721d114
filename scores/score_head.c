/* Reading one (layer, KV head) of a trace into doubles, for the analyser and
 * the eviction steps (policies, offline replay) alike, with the OracleHead
 * view filled once at allocation. */
#include "scores/score_head.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"

void score_head_free(ScoreHead *h) {
  free(h->K_f), free(h->V_f), free(h->Q_f), free(h->O_f), free(h->lse_f);
  free(h->K), free(h->V), free(h->Q), free(h->O), free(h->lse);
  memset(h, 0, sizeof *h);
}

int score_head_alloc(ScoreHead *h, const TraceReader *reader) {
  const TraceMeta *meta = trace_meta(reader);
  memset(h, 0, sizeof *h);
  size_t d = meta->model.head_dim, n_pos = meta->n_positions, rows = meta->n_rows;
  size_t group = meta->model.n_heads / meta->model.n_kv_heads;
  /* Each allocation only when the ones before it succeeded, so the message
   * names the first tensor that did not fit. */
  const TraceReader *r = reader;
  bool allocated =
      (h->K_f = trace_alloc(r, n_pos * d, sizeof(float), "K of one KV head (float)")) &&
      (h->V_f = trace_alloc(r, n_pos * d, sizeof(float), "V of one KV head (float)")) &&
      (h->Q_f =
           trace_alloc(r, group * rows * d, sizeof(float), "Q of a KV head's queries (float)")) &&
      (h->O_f =
           trace_alloc(r, group * rows * d, sizeof(float), "O of a KV head's queries (float)")) &&
      (h->lse_f = trace_alloc(r, rows, sizeof(float), "lse of one head (float)")) &&
      (h->K = trace_alloc(r, n_pos * d, sizeof(double), "K of one KV head")) &&
      (h->V = trace_alloc(r, n_pos * d, sizeof(double), "V of one KV head")) &&
      (h->Q = trace_alloc(r, group * rows * d, sizeof(double), "Q of a KV head's queries")) &&
      (h->O = trace_alloc(r, group * rows * d, sizeof(double), "O of a KV head's queries")) &&
      (h->lse = trace_alloc(r, group * rows, sizeof(double), "lse of a KV head's queries"));
  if (!allocated) {
    score_head_free(h);
    return OBC_ENOMEM;
  }
  h->data = (OracleHead){.n_positions = n_pos,
                         .n_prompt = meta->n_prompt,
                         .head_dim = d,
                         .group_size = group,
                         .n_rows = rows,
                         .row_positions = meta->row_positions,
                         .K = h->K,
                         .V = h->V,
                         .Q = h->Q,
                         .O = h->O,
                         .lse = h->lse,
                         .attn_scale = meta->model.attn_scale,
                         .K_f = h->K_f,
                         .V_f = h->V_f,
                         .Q_f = h->Q_f,
                         .O_f = h->O_f};
  return OBC_OK;
}

void score_head_float_keys(ScoreHead *h) {
  free(h->K);
  h->K = NULL;
  h->data.K = NULL;
}

static void to_doubles(const float *in, size_t n, double *out) {
  for (size_t i = 0; i < n; i++) out[i] = (double)in[i];
}

int score_head_read(ScoreHead *h, TraceReader *reader, size_t layer, size_t kv_head) {
  const TraceMeta *meta = trace_meta(reader);
  size_t d = meta->model.head_dim, rows = meta->n_rows, group = h->data.group_size;
  int rc = trace_read_kv(reader, layer, kv_head, h->K_f, h->V_f);
  if (rc) return rc;
  if (h->K) to_doubles(h->K_f, meta->n_positions * d, h->K);
  to_doubles(h->V_f, meta->n_positions * d, h->V);
  for (size_t j = 0; j < group; j++) {
    float *q = h->Q_f + j * rows * d, *o = h->O_f + j * rows * d;
    rc = trace_read_rows(reader, layer, kv_head * group + j, q, o, h->lse_f);
    if (rc) return rc;
    to_doubles(q, rows * d, h->Q + j * rows * d);
    to_doubles(o, rows * d, h->O + j * rows * d);
    to_doubles(h->lse_f, rows, h->lse + j * rows);
  }
  return OBC_OK;
}
