/* Batched decoding on the CPU (runtime/batch.h). One call advances every
 * sequence by one token: the weight products are one GEMM of n_seqs rows each
 * (cpu_gemm_weight), and attention is split into (KV head, block of
 * BATCH_BLOCK sequences) items over OpenMP threads. An item multiplies its
 * sequences' grouped queries with the shared prompt keys in one sgemm
 * (scores (rows, s); keys that all its sequences dropped are left out),
 * scores each sequence's own tail keys, applies the
 * sequence's marks inside the softmax (dropped keys: out of the max and the
 * sum, weight exactly 0), then P V as one sgemm plus the tail part. Blocks
 * are fixed, and each item's sgemm runs on one thread (OpenBLAS does so
 * inside a parallel region), so a sequence's result does not depend on the
 * thread count. docs/SCIENCE.md, "Batched replay", says why the results equal
 * the one-at-a-time path up to rounding. */
#include "runtime/batch.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "runtime/cpu_ops.h"

/* Sequences per attention item: its BATCH_BLOCK * group query rows meet the
 * prompt keys (read once per item) in one sgemm. */
enum { BATCH_BLOCK = 16 };

struct RuntimeBatch {
  const Model *model;
  const RuntimeCache *cache;
  size_t n_prompt; /* s: shared prompt positions */
  size_t max_seqs, max_steps, n_seqs, step;
  unsigned char *evicted; /* (max_seqs, n_layers, n_kv_heads, s) 1 = dropped */
  float *tail_k;          /* (n_layers, n_kv_heads, max_seqs, max_steps, head_dim) post-RoPE */
  float *tail_v;          /* (n_layers, n_kv_heads, max_seqs, max_steps, head_dim) */
  double *inv_freq;       /* (head_dim / 2) RoPE frequencies */
  float *x;               /* (max_seqs, dim) residual stream */
  float *xb;              /* (max_seqs, dim) normalised input of a block */
  float *q;               /* (max_seqs, n_heads * head_dim) */
  float *k;               /* (max_seqs, n_kv_heads * head_dim) */
  float *v;               /* (max_seqs, n_kv_heads * head_dim) */
  float *att;             /* (max_seqs, n_heads * head_dim) per-head attention outputs */
  float *gate;            /* (max_seqs, ffn_dim) */
  float *up;              /* (max_seqs, ffn_dim) */
};

/* Per-thread scratch of the attention items. */
typedef struct {
  size_t rows;          /* BATCH_BLOCK * group */
  size_t width;         /* s + max_steps: a score row, prompt then tail */
  float *q;             /* (threads, rows, head_dim) gathered queries */
  float *o;             /* (threads, rows, head_dim) outputs before scattering */
  float *p;             /* (threads, rows, width) scores, then softmax weights */
  float *k, *v;         /* (threads, s, head_dim) an item's prompt keys and values, gathered */
  unsigned char *marks; /* (threads, BATCH_BLOCK + 1, s) dropped by all, then marks */
} BatchScratch;

size_t runtime_batch_bytes_per_seq(const Runtime *runtime, size_t max_steps) {
  const ModelConfig *c = &runtime_model(runtime)->config;
  size_t s = runtime_position(runtime), heads = c->n_layers * c->n_kv_heads;
  size_t q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
  size_t acts = 2 * c->dim + 2 * q_dim + 2 * kv_dim + 2 * c->ffn_dim + c->vocab_size;
  return heads * s + 2 * heads * max_steps * c->head_dim * sizeof(float) + acts * sizeof(float);
}

void runtime_batch_free(RuntimeBatch *b) {
  if (!b) return;
  free(b->evicted);
  free(b->tail_k);
  free(b->tail_v);
  free(b->inv_freq);
  free(b->x);
  free(b->xb);
  free(b->q);
  free(b->k);
  free(b->v);
  free(b->att);
  free(b->gate);
  free(b->up);
  free(b);
}

int runtime_batch_create(Runtime *runtime, size_t max_seqs, size_t max_steps, RuntimeBatch **out) {
  assert(runtime && out);
  *out = NULL;
  if (max_seqs == 0 || max_steps == 0)
    return obc_fail(OBC_EINVAL, "runtime batch: no room (%zu sequences of %zu steps)", max_seqs,
                    max_steps);
  const Model *model = runtime_model(runtime);
  const ModelConfig *c = &model->config;
  RuntimeBatch *b = obc_calloc(1, sizeof *b, "runtime batch");
  if (!b) return OBC_ENOMEM;
  b->model = model;
  b->cache = runtime_cache(runtime);
  b->n_prompt = runtime_position(runtime);
  b->max_seqs = max_seqs;
  b->max_steps = max_steps;
  size_t heads = c->n_layers * c->n_kv_heads, n = max_seqs, hd = c->head_dim;
  size_t q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
  const char *what = "batched replay (hint: a smaller --batch)";
  b->evicted = obc_calloc(n * heads * (b->n_prompt ? b->n_prompt : 1), 1, what);
  b->tail_k = obc_malloc(heads * n * max_steps * hd * sizeof(float), what);
  b->tail_v = obc_malloc(heads * n * max_steps * hd * sizeof(float), what);
  b->inv_freq = obc_malloc(hd / 2 * sizeof(double), what);
  b->x = obc_malloc(n * c->dim * sizeof(float), what);
  b->xb = obc_malloc(n * c->dim * sizeof(float), what);
  b->q = obc_malloc(n * q_dim * sizeof(float), what);
  b->k = obc_malloc(n * kv_dim * sizeof(float), what);
  b->v = obc_malloc(n * kv_dim * sizeof(float), what);
  b->att = obc_malloc(n * q_dim * sizeof(float), what);
  b->gate = obc_malloc(n * c->ffn_dim * sizeof(float), what);
  b->up = obc_malloc(n * c->ffn_dim * sizeof(float), what);
  if (!b->evicted || !b->tail_k || !b->tail_v || !b->inv_freq || !b->x || !b->xb || !b->q ||
      !b->k || !b->v || !b->att || !b->gate || !b->up) {
    runtime_batch_free(b);
    return OBC_ENOMEM;
  }
  model_rope_inv_freq(model, b->inv_freq);
  *out = b;
  return OBC_OK;
}

size_t runtime_batch_max_seqs(const RuntimeBatch *b) { return b->max_seqs; }
size_t runtime_batch_steps(const RuntimeBatch *b) { return b->step; }

int runtime_batch_reset(RuntimeBatch *b, size_t n_seqs) {
  if (n_seqs == 0 || n_seqs > b->max_seqs)
    return obc_fail(OBC_EINVAL, "runtime batch: %zu sequences (expected 1..%zu)", n_seqs,
                    b->max_seqs);
  const ModelConfig *c = &b->model->config;
  b->n_seqs = n_seqs;
  b->step = 0;
  memset(b->evicted, 0, n_seqs * c->n_layers * c->n_kv_heads * b->n_prompt);
  return OBC_OK;
}

int runtime_batch_set_kept(RuntimeBatch *b, size_t seq, size_t layer, size_t kv_head,
                           const unsigned char *keep, size_t n) {
  const ModelConfig *c = &b->model->config;
  if (seq >= b->n_seqs || layer >= c->n_layers || kv_head >= c->n_kv_heads || n > b->n_prompt)
    return obc_fail(OBC_EINVAL,
                    "runtime batch: marks of sequence %zu, layer %zu, KV head %zu over %zu "
                    "positions (expected < %zu, < %zu, < %zu, <= %zu)",
                    seq, layer, kv_head, n, b->n_seqs, c->n_layers, c->n_kv_heads, b->n_prompt);
  unsigned char *ev =
      b->evicted + ((seq * c->n_layers + layer) * c->n_kv_heads + kv_head) * b->n_prompt;
  for (size_t p = 0; p < n; p++) ev[p] = keep[p] ? 0 : 1;
  return OBC_OK;
}

/* Softmax of one score row: prompt entries [0, s) with their marks (dropped:
 * out of the max and the sum, then exactly 0) and n_tail tail entries after
 * them, all kept (the tail is never empty, so the max is a kept score).
 * The sum runs in 16 lanes in a fixed order (vectorised, the same on every
 * thread). A dropped entry's exp is multiplied by 0: finite,
 * since cpu_expf clamps its argument, so the product is exactly 0. */
static void softmax_masked(float *row, const unsigned char *evicted, size_t s, size_t n_tail) {
  enum { LANES = 16 };
  size_t body = s / LANES * LANES;
  float lane_sum[LANES] = {0}, max = -INFINITY;
  /* max is exact in any order: vectorised without reordering the result */
#pragma omp simd reduction(max : max)
  for (size_t p = 0; p < s; p++) {
    float v = row[p] - 1e30f * (float)evicted[p]; /* dropped: far below any score */
    max = v > max ? v : max;
  }
  for (size_t u = 0; u < n_tail; u++) max = row[s + u] > max ? row[s + u] : max;
  for (size_t p = 0; p < s; p++) row[p] = cpu_expf(row[p] - max) * (float)(1 - evicted[p]);
  for (size_t p = 0; p < body; p += LANES)
    for (size_t l = 0; l < LANES; l++) lane_sum[l] += row[p + l];
  float sum = 0.0f;
  for (size_t l = 0; l < LANES; l++) sum += lane_sum[l];
  for (size_t p = body; p < s; p++) sum += row[p];
  for (size_t u = 0; u < n_tail; u++) {
    row[s + u] = cpu_expf(row[s + u] - max);
    sum += row[s + u];
  }
  float inv = 1.0f / sum;
  for (size_t p = 0; p < s + n_tail; p++) row[p] *= inv;
}

/* The prompt keys of one attention item: every position when some sequence
 * of the block keeps it, else only those (a key all of them dropped has
 * weight exactly 0 in every row, so leaving it out changes no sum but its
 * order). */
typedef struct {
  size_t n;                   /* keys */
  const float *k, *v;         /* (n, head_dim) */
  const unsigned char *marks; /* sequence i's marks over the n keys: marks + i * stride */
  size_t stride;
} BatchKeys;

/* The keys of sequences [b0, b0 + nb) for (layer, g): gathered into the
 * item's scratch when the block drops some position in every sequence. */
static void block_keys(const RuntimeBatch *b, size_t layer, size_t g, size_t b0, size_t nb,
                       const BatchScratch *sc, size_t thread, BatchKeys *keys) {
  const ModelConfig *c = &b->model->config;
  size_t s = b->n_prompt, hd = c->head_dim, heads = c->n_layers * c->n_kv_heads;
  const unsigned char *ev = b->evicted + (b0 * heads + layer * c->n_kv_heads + g) * s;
  *keys = (BatchKeys){.n = s,
                      .k = runtime_cache_k(b->cache, layer, g),
                      .v = runtime_cache_v(b->cache, layer, g),
                      .marks = ev,
                      .stride = heads * s};
  unsigned char *all = sc->marks + thread * (BATCH_BLOCK + 1) * s; /* 1 = dropped by all */
  memcpy(all, ev, s);
  for (size_t i = 1; i < nb; i++)
    for (size_t p = 0; p < s; p++) all[p] &= ev[i * keys->stride + p];
  size_t n = 0;
  for (size_t p = 0; p < s; p++) n += !all[p];
  if (n == s) return;
  float *k = sc->k + thread * s * hd, *v = sc->v + thread * s * hd;
  unsigned char *marks = all + s;
  size_t j = 0;
  for (size_t p = 0; p < s; p++) {
    if (all[p]) continue;
    memcpy(k + j * hd, keys->k + p * hd, hd * sizeof(float));
    memcpy(v + j * hd, keys->v + p * hd, hd * sizeof(float));
    for (size_t i = 0; i < nb; i++) marks[i * n + j] = ev[i * keys->stride + p];
    j++;
  }
  *keys = (BatchKeys){.n = n, .k = k, .v = v, .marks = marks, .stride = n};
}

/* Attention of sequences [b0, b0 + nb) for KV head g of one layer, on the
 * calling thread; the current token is tail row b->step. */
static void attend_block(const RuntimeBatch *b, size_t layer, size_t g, size_t b0, size_t nb,
                         const BatchScratch *sc, size_t thread) {
  const ModelConfig *c = &b->model->config;
  size_t hd = c->head_dim, group = c->n_heads / c->n_kv_heads, q_dim = c->n_heads * hd;
  size_t n_tail = b->step + 1, rows = nb * group, width = sc->width;
  float *qb = sc->q + thread * sc->rows * hd, *ob = sc->o + thread * sc->rows * hd;
  float *pb = sc->p + thread * sc->rows * width;
  float scale = (float)(1.0 / sqrt((double)hd));
  BatchKeys keys;
  block_keys(b, layer, g, b0, nb, sc, thread, &keys);
  size_t s = keys.n;
  for (size_t i = 0; i < nb; i++) /* rows (sequence, query head of the group) */
    memcpy(qb + i * group * hd, b->q + (b0 + i) * q_dim + g * group * hd,
           group * hd * sizeof(float));
  if (s > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)s, (int)hd, scale, qb,
                (int)hd, keys.k, (int)hd, 0.0f, pb, (int)width);
  for (size_t i = 0; i < nb; i++) {
    const float *tk =
        b->tail_k + ((layer * c->n_kv_heads + g) * b->max_seqs + b0 + i) * b->max_steps * hd;
    for (size_t j = 0; j < group; j++) {
      float *row = pb + (i * group + j) * width;
      const float *qr = qb + (i * group + j) * hd;
      for (size_t u = 0; u < n_tail; u++) {
        float dot = 0.0f;
        for (size_t d = 0; d < hd; d++) dot += qr[d] * tk[u * hd + d];
        row[s + u] = scale * dot;
      }
      softmax_masked(row, keys.marks + i * keys.stride, s, n_tail);
    }
  }
  if (s > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)hd, (int)s, 1.0f, pb,
                (int)width, keys.v, (int)hd, 0.0f, ob, (int)hd);
  else
    memset(ob, 0, rows * hd * sizeof(float));
  for (size_t i = 0; i < nb; i++) {
    size_t seq = b0 + i;
    const float *tv =
        b->tail_v + ((layer * c->n_kv_heads + g) * b->max_seqs + seq) * b->max_steps * hd;
    for (size_t j = 0; j < group; j++) {
      const float *p = pb + (i * group + j) * width + s;
      float *o = ob + (i * group + j) * hd;
      for (size_t u = 0; u < n_tail; u++)
        for (size_t d = 0; d < hd; d++) o[d] += p[u] * tv[u * hd + d];
    }
    memcpy(b->att + seq * q_dim + g * group * hd, ob + i * group * hd, group * hd * sizeof(float));
  }
}

/* Attention of every sequence for one layer: (KV head, block) items. */
static void attend(const RuntimeBatch *b, size_t layer, const BatchScratch *sc) {
  const ModelConfig *c = &b->model->config;
  size_t n_blocks = (b->n_seqs + BATCH_BLOCK - 1) / BATCH_BLOCK;
  size_t n_items = c->n_kv_heads * n_blocks;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t item = 0; item < n_items; item++) {
    size_t g = item / n_blocks, b0 = item % n_blocks * BATCH_BLOCK;
    size_t nb = b->n_seqs - b0 < BATCH_BLOCK ? b->n_seqs - b0 : BATCH_BLOCK;
    attend_block(b, layer, g, b0, nb, sc, (size_t)omp_get_thread_num());
  }
}

/* Copies each sequence's new K/V rows (post-RoPE) into its tail at b->step. */
static void store_tail(RuntimeBatch *b, size_t layer) {
  const ModelConfig *c = &b->model->config;
  size_t hd = c->head_dim, kv_dim = c->n_kv_heads * hd;
  for (size_t g = 0; g < c->n_kv_heads; g++)
    for (size_t seq = 0; seq < b->n_seqs; seq++) {
      size_t at = (((layer * c->n_kv_heads + g) * b->max_seqs + seq) * b->max_steps + b->step) * hd;
      memcpy(b->tail_k + at, b->k + seq * kv_dim + g * hd, hd * sizeof(float));
      memcpy(b->tail_v + at, b->v + seq * kv_dim + g * hd, hd * sizeof(float));
    }
}

/* One transformer block on every sequence's row in b->x; cos/sin: the RoPE
 * table row of position s + step. */
static void batch_layer(RuntimeBatch *b, size_t layer, const float *cos_row, const float *sin_row,
                        const BatchScratch *sc) {
  const ModelConfig *c = &b->model->config;
  const ModelLayerWeights *w = &b->model->weights.layers[layer];
  size_t n = b->n_seqs, hd = c->head_dim, q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
  double gemm = 0.0; /* cpu_gemm_weight's timer (unused here) */

  cpu_rmsnorm(b->xb, b->x, w->attn_norm, n, c->dim, c->norm_eps);
  cpu_gemm_weight(b->q, b->xb, &w->wq, n, 0.0f, &gemm);
  cpu_gemm_weight(b->k, b->xb, &w->wk, n, 0.0f, &gemm);
  cpu_gemm_weight(b->v, b->xb, &w->wv, n, 0.0f, &gemm);
  cpu_attention_inputs(c, w, b->q, b->k, b->v, n);
  for (size_t seq = 0; seq < n; seq++) { /* every row at the same position */
    cpu_rope(b->q + seq * q_dim, 1, c->n_heads, hd, 0, cos_row, sin_row, c->rope_interleaved);
    cpu_rope(b->k + seq * kv_dim, 1, c->n_kv_heads, hd, 0, cos_row, sin_row, c->rope_interleaved);
  }
  store_tail(b, layer);
  attend(b, layer, sc);

  cpu_gemm_weight(b->x, b->att, &w->wo, n, 1.0f, &gemm);
  cpu_rmsnorm(b->xb, b->x, w->ffn_norm, n, c->dim, c->norm_eps);
  cpu_gemm_weight(b->gate, b->xb, &w->w_gate, n, 0.0f, &gemm);
  cpu_gemm_weight(b->up, b->xb, &w->w_up, n, 0.0f, &gemm);
  cpu_swiglu(b->gate, b->up, n * c->ffn_dim);
  cpu_gemm_weight(b->x, b->gate, &w->w_down, n, 1.0f, &gemm);
}

int runtime_batch_forward(RuntimeBatch *b, const int32_t *tokens, float *logits) {
  assert(b && tokens);
  const ModelConfig *c = &b->model->config;
  const ModelWeights *w = &b->model->weights;
  size_t n = b->n_seqs, pos = b->n_prompt + b->step, half = c->head_dim / 2;
  if (n == 0) return obc_fail(OBC_EINVAL, "runtime batch: no sequences (reset first)");
  if (b->step >= b->max_steps)
    return obc_fail(OBC_EINVAL, "runtime batch: step %zu beyond the %zu the batch holds",
                    b->step + 1, b->max_steps);
  for (size_t seq = 0; seq < n; seq++)
    if (tokens[seq] < 0 || (size_t)tokens[seq] >= c->vocab_size)
      return obc_fail(OBC_EINVAL, "runtime batch: sequence %zu has token id %d (expected 0..%zu)",
                      seq, (int)tokens[seq], c->vocab_size - 1);
  /* RoPE of position pos, as the CPU backend's tables hold it. */
  float *cos_row = obc_malloc(2 * half * sizeof(float), "RoPE row");
  size_t threads = (size_t)omp_get_max_threads();
  BatchScratch sc = {.rows = BATCH_BLOCK * (c->n_heads / c->n_kv_heads),
                     .width = b->n_prompt + b->max_steps};
  sc.q = obc_malloc(threads * sc.rows * c->head_dim * sizeof(float), "attention scratch");
  sc.o = obc_malloc(threads * sc.rows * c->head_dim * sizeof(float), "attention scratch");
  sc.p = obc_malloc(threads * sc.rows * sc.width * sizeof(float), "attention scores");
  size_t s_alloc = b->n_prompt ? b->n_prompt : 1;
  sc.k = obc_malloc(threads * s_alloc * c->head_dim * sizeof(float), "attention scratch");
  sc.v = obc_malloc(threads * s_alloc * c->head_dim * sizeof(float), "attention scratch");
  sc.marks = obc_malloc(threads * (BATCH_BLOCK + 1) * s_alloc, "attention scratch");
  int rc = cos_row && sc.q && sc.o && sc.p && sc.k && sc.v && sc.marks ? OBC_OK : OBC_ENOMEM;
  if (!rc) {
    float *sin_row = cos_row + half;
    for (size_t i = 0; i < half; i++) {
      double angle = (double)pos * b->inv_freq[i];
      cos_row[i] = (float)cos(angle);
      sin_row[i] = (float)sin(angle);
    }
    cpu_embed(b->x, &w->token_embedding, tokens, n);
    for (size_t layer = 0; layer < c->n_layers; layer++)
      batch_layer(b, layer, cos_row, sin_row, &sc);
    double gemm = 0.0;
    if (logits) {
      cpu_rmsnorm(b->xb, b->x, w->output_norm, n, c->dim, c->norm_eps);
      cpu_gemm_weight(logits, b->xb, &w->output, n, 0.0f, &gemm);
    }
    b->step++;
  }
  free(cos_row);
  free(sc.q);
  free(sc.o);
  free(sc.p);
  free(sc.k);
  free(sc.v);
  free(sc.marks);
  return rc;
}
