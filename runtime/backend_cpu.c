/* The CPU backend of the runtime: an fp32 forward pass over a chunk of tokens
 * with every weight product as one cpu_gemm_weight on the (n_tokens, dim)
 * activations (weights fp32 or in their stored GGUF type), attention from runtime/cpu_attention.c, and element-wise work
 * from runtime/cpu_ops.c. The capture seam costs nothing when capture is NULL. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_time.h"
#include "runtime/cpu_attention.h"
#include "runtime/cpu_capture.h"
#include "runtime/cpu_ops.h"
#include "runtime/runtime.h"

typedef struct {
  const Model *model;
  RuntimeCache *cache;
  size_t max_batch;
  float *rope_cos; /* (max_context, head_dim / 2) */
  float *rope_sin; /* (max_context, head_dim / 2) */
  float *x;        /* (max_batch, dim) residual stream */
  float *xb;       /* (max_batch, dim) normalised input of a block */
  float *q;        /* (max_batch, n_heads * head_dim) */
  float *k;        /* (max_batch, n_kv_heads * head_dim) */
  float *v;        /* (max_batch, n_kv_heads * head_dim) */
  float *att;      /* (max_batch, n_heads * head_dim) per-head attention outputs */
  float *lse;      /* (n_heads, max_batch) */
  float *gate;     /* (max_batch, ffn_dim) */
  float *up;       /* (max_batch, ffn_dim) */
} CpuState;

static void cpu_destroy(void *state) {
  CpuState *s = state;
  if (!s) return;
  free(s->rope_cos);
  free(s->rope_sin);
  free(s->x);
  free(s->xb);
  free(s->q);
  free(s->k);
  free(s->v);
  free(s->att);
  free(s->lse);
  free(s->gate);
  free(s->up);
  free(s);
}

static int rope_tables(CpuState *s) {
  const ModelConfig *c = &s->model->config;
  size_t half = c->head_dim / 2, max_context = s->cache->max_context;
  double *inv_freq = obc_malloc(half * sizeof(double), "RoPE frequencies");
  s->rope_cos = obc_malloc(max_context * half * sizeof(float), "RoPE cos table");
  s->rope_sin = obc_malloc(max_context * half * sizeof(float), "RoPE sin table");
  if (!inv_freq || !s->rope_cos || !s->rope_sin) {
    free(inv_freq);
    return OBC_ENOMEM;
  }
  model_rope_inv_freq(s->model, inv_freq);
  for (size_t p = 0; p < max_context; p++)
    for (size_t i = 0; i < half; i++) {
      double angle = (double)p * inv_freq[i];
      s->rope_cos[p * half + i] = (float)cos(angle);
      s->rope_sin[p * half + i] = (float)sin(angle);
    }
  free(inv_freq);
  return OBC_OK;
}

static int cpu_create(const Model *model, const RuntimeOptions *options, RuntimeCache *cache,
                      void **out) {
  const ModelConfig *c = &model->config;
  CpuState *s = obc_calloc(1, sizeof(CpuState), "CPU backend");
  if (!s) return OBC_ENOMEM;
  s->model = model;
  s->cache = cache;
  s->max_batch = options->max_batch;
  size_t b = s->max_batch, q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
  s->x = obc_malloc(b * c->dim * sizeof(float), "activations");
  s->xb = obc_malloc(b * c->dim * sizeof(float), "activations");
  s->q = obc_malloc(b * q_dim * sizeof(float), "queries");
  s->k = obc_malloc(b * kv_dim * sizeof(float), "keys");
  s->v = obc_malloc(b * kv_dim * sizeof(float), "values");
  s->att = obc_malloc(b * q_dim * sizeof(float), "attention outputs");
  s->lse = obc_malloc(c->n_heads * b * sizeof(float), "attention lse");
  s->gate = obc_malloc(b * c->ffn_dim * sizeof(float), "MLP activations");
  s->up = obc_malloc(b * c->ffn_dim * sizeof(float), "MLP activations");
  if (!s->x || !s->xb || !s->q || !s->k || !s->v || !s->att || !s->lse || !s->gate || !s->up ||
      rope_tables(s) < 0) {
    cpu_destroy(s);
    return OBC_ENOMEM;
  }
  *out = s;
  return OBC_OK;
}

/* Copies the chunk's K/V rows (n, kv_dim) into the cache at pos0. */
static void store_kv(CpuState *s, size_t layer, size_t pos0, size_t n) {
  const ModelConfig *c = &s->model->config;
  size_t hd = c->head_dim, kv_dim = c->n_kv_heads * hd;
  for (size_t g = 0; g < c->n_kv_heads; g++) {
    float *kc = runtime_cache_k(s->cache, layer, g) + pos0 * hd;
    float *vc = runtime_cache_v(s->cache, layer, g) + pos0 * hd;
    for (size_t t = 0; t < n; t++) {
      memcpy(kc + t * hd, s->k + t * kv_dim + g * hd, hd * sizeof(float));
      memcpy(vc + t * hd, s->v + t * kv_dim + g * hd, hd * sizeof(float));
    }
  }
}

static int report_layer(CpuState *s, size_t layer, size_t pos0, size_t n, CpuCaptureRows *rows,
                        const RuntimeCapture *capture) {
  const ModelConfig *c = &s->model->config;
  cpu_capture_gather(rows, s->q, s->att, s->lse);
  RuntimeLayerCapture view = {
      .layer = layer,
      .n_heads = c->n_heads,
      .n_kv_heads = c->n_kv_heads,
      .head_dim = c->head_dim,
      .pos0 = pos0,
      .n_tokens = n,
      .k = runtime_cache_k(s->cache, layer, 0) + pos0 * c->head_dim,
      .v = runtime_cache_v(s->cache, layer, 0) + pos0 * c->head_dim,
      .kv_stride = s->cache->max_context,
      .n_rows = rows->n_rows,
      .row_positions = rows->positions,
      .q = rows->q,
      .o = rows->o,
      .lse = rows->lse,
      .attn = rows->attn,
      .n_keys = pos0 + n,
  };
  return capture->on_layer(capture->user, &view);
}

/* One transformer block on the chunk in s->x (positions [pos0, pos0 + n)). */
static int run_layer(CpuState *s, size_t layer, size_t pos0, size_t n, CpuCaptureRows *rows,
                     const RuntimeCapture *capture, RuntimeProfile *profile) {
  const ModelConfig *c = &s->model->config;
  const ModelLayerWeights *w = &s->model->weights.layers[layer];
  size_t hd = c->head_dim;
  double gemm = 0.0;

  cpu_rmsnorm(s->xb, s->x, w->attn_norm, n, c->dim, c->norm_eps);
  cpu_gemm_weight(s->q, s->xb, &w->wq, n, 0.0f, &gemm);
  cpu_gemm_weight(s->k, s->xb, &w->wk, n, 0.0f, &gemm);
  cpu_gemm_weight(s->v, s->xb, &w->wv, n, 0.0f, &gemm);
  cpu_attention_inputs(c, w, s->q, s->k, s->v, n);
  cpu_rope(s->q, n, c->n_heads, hd, pos0, s->rope_cos, s->rope_sin, c->rope_interleaved);
  cpu_rope(s->k, n, c->n_kv_heads, hd, pos0, s->rope_cos, s->rope_sin, c->rope_interleaved);
  store_kv(s, layer, pos0, n);

  double t_att = obc_now_seconds();
  CpuAttentionShape shape = {
      .n_heads = c->n_heads,
      .n_kv_heads = c->n_kv_heads,
      .head_dim = hd,
      .kv_stride = s->cache->max_context,
      .pos0 = pos0,
      .n = n,
      /* the eviction marks (runtime_evict, runtime_set_kept), or NULL */
      .evicted = s->cache->evicted
                     ? s->cache->evicted + layer * c->n_kv_heads * s->cache->max_context
                     : NULL};
  CpuAttentionRows attn_rows;
  const CpuAttentionRows *want = rows ? cpu_capture_attention_rows(rows, &attn_rows) : NULL;
  int rc = cpu_attention(&shape, s->q, runtime_cache_k(s->cache, layer, 0),
                         runtime_cache_v(s->cache, layer, 0), s->att, s->lse, want,
                         &profile->attention_gemm_seconds);
  if (rc) return rc;
  profile->attention_seconds += obc_now_seconds() - t_att;
  if (rows && (rc = report_layer(s, layer, pos0, n, rows, capture))) return rc;

  cpu_gemm_weight(s->x, s->att, &w->wo, n, 1.0f, &gemm);
  cpu_rmsnorm(s->xb, s->x, w->ffn_norm, n, c->dim, c->norm_eps);
  cpu_gemm_weight(s->gate, s->xb, &w->w_gate, n, 0.0f, &gemm);
  cpu_gemm_weight(s->up, s->xb, &w->w_up, n, 0.0f, &gemm);
  cpu_swiglu(s->gate, s->up, n * c->ffn_dim);
  cpu_gemm_weight(s->x, s->gate, &w->w_down, n, 1.0f, &gemm);

  profile->gemm_seconds += gemm;
  return 0;
}

static int cpu_forward(void *state, const int32_t *tokens, size_t n, RuntimeLogits which,
                       float *logits, const RuntimeCapture *capture, RuntimeProfile *profile) {
  CpuState *s = state;
  const ModelConfig *c = &s->model->config;
  const ModelWeights *w = &s->model->weights;
  size_t pos0 = s->cache->length;
  assert(n > 0 && n <= s->max_batch && pos0 + n <= s->cache->max_context);

  double t0 = obc_now_seconds();
  cpu_embed(s->x, &w->token_embedding, tokens, n);
  profile->other_seconds += obc_now_seconds() - t0;

  CpuCaptureRows rows;
  int rc = 0;
  if (capture && (rc = cpu_capture_begin(&rows, capture, pos0, n, c->n_heads, c->head_dim)) < 0)
    return rc;
  for (size_t layer = 0; layer < c->n_layers && !rc; layer++) {
    double start = obc_now_seconds();
    double timed_before = profile->gemm_seconds + profile->attention_seconds;
    rc = run_layer(s, layer, pos0, n, capture ? &rows : NULL, capture, profile);
    double timed = profile->gemm_seconds + profile->attention_seconds - timed_before;
    profile->other_seconds += obc_now_seconds() - start - timed;
  }
  if (capture) cpu_capture_end(&rows);
  if (rc) return rc;
  s->cache->length = pos0 + n;

  if (which != RUNTIME_LOGITS_NONE) {
    size_t first = which == RUNTIME_LOGITS_LAST ? n - 1 : 0;
    size_t rows_out = n - first;
    double t_norm = obc_now_seconds();
    cpu_rmsnorm(s->xb, s->x + first * c->dim, w->output_norm, rows_out, c->dim, c->norm_eps);
    profile->other_seconds += obc_now_seconds() - t_norm;
    cpu_gemm_weight(logits, s->xb, &w->output, rows_out, 0.0f, &profile->gemm_seconds);
  }
  profile->tokens += n;
  return 0;
}

const RuntimeBackend runtime_backend_cpu = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .forward = cpu_forward,
};
