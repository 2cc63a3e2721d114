/* Causal GQA attention on the CPU, as one tiled online-softmax pass
 * (docs/SCIENCE.md, "Attention in one pass"). Work is split into (stack of
 * query heads of one KV group, block of BLOCK queries) items over OpenMP
 * threads; each item walks the keys in tiles of KEY_TILE in a fixed order and
 * runs its GEMMs single-threaded (OpenBLAS does so inside a parallel region),
 * so the result of an item does not depend on which thread ran it or how many
 * there are. */
#include "runtime/cpu_attention.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_time.h"
#include "runtime/cpu_ops.h"

/* An item is a block of BLOCK queries of up to STACK query heads of one KV
 * group, stacked into one GEMM per key tile: each K and V tile is read once
 * for the stack, and the taller GEMM runs nearer the sgemm peak (5-6% less
 * attention time than one head per item at SmolLM2's group of 3).
 * KEY_TILE keys per tile: the item's working set per tile, the score tile
 * (3 x BLOCK x KEY_TILE floats, 192 KiB for a group of 3) and the K and V
 * tiles (KEY_TILE x head_dim, 64 KiB each at head_dim 64), stays in a
 * core's L2 (1-2 MiB on current x86-64 server cores) from the score GEMM
 * through the softmax to the P V GEMM, where the former whole BLOCK x n_keys
 * score rows of each head (1 MiB at 4096 keys) went out to the shared L3
 * between passes. Longer tiles amortise the per-call GEMM overhead and the
 * output rescaling: 512 measured 1-3% faster than 256 and 128 3% slower
 * (SmolLM2 shapes, 1 MiB L2), so 256 keeps most of the gain at half the
 * working set. */
enum { BLOCK = 64, KEY_TILE = 256, STACK = 4, LANES = 16 };

/* Running state of one item's stacked rows (at most STACK * BLOCK). */
typedef struct {
  float max[STACK * BLOCK];   /* running max of the kept logits; -inf while none */
  float sum[STACK * BLOCK];   /* running sum of exp(logit - max) */
  float alpha[STACK * BLOCK]; /* this tile's rescaling factor */
} RowState;

/* Max of row[j] over j < n with evicted[j] == 0 (evicted may be NULL);
 * -inf when none. 16 lanes in a fixed order: vectorised. */
static float tile_row_max(const float *row, const unsigned char *evicted, size_t n) {
  float lane[LANES];
  for (size_t l = 0; l < LANES; l++) lane[l] = -INFINITY;
  size_t body = n / LANES * LANES;
  if (evicted) {
    for (size_t j = 0; j < body; j += LANES)
      for (size_t l = 0; l < LANES; l++) {
        float x = evicted[j + l] ? -INFINITY : row[j + l];
        lane[l] = x > lane[l] ? x : lane[l];
      }
  } else {
    for (size_t j = 0; j < body; j += LANES)
      for (size_t l = 0; l < LANES; l++) lane[l] = row[j + l] > lane[l] ? row[j + l] : lane[l];
  }
  float max = -INFINITY;
  for (size_t l = 0; l < LANES; l++) max = lane[l] > max ? lane[l] : max;
  for (size_t j = body; j < n; j++)
    if (!(evicted && evicted[j])) max = row[j] > max ? row[j] : max;
  return max;
}

/* row[j] = exp(row[j] - max) for j < n (exactly 0 where evicted); returns
 * their sum, over 16 lanes in a fixed order, in the same pass (one read and
 * one write of the row). */
static float tile_row_exp(float *row, const unsigned char *evicted, size_t n, float max) {
  float lane[LANES] = {0};
  size_t body = n / LANES * LANES;
  if (evicted) {
    for (size_t j = 0; j < body; j += LANES)
      for (size_t l = 0; l < LANES; l++) {
        float p = evicted[j + l] ? 0.0f : cpu_expf(row[j + l] - max);
        row[j + l] = p;
        lane[l] += p;
      }
  } else {
    for (size_t j = 0; j < body; j += LANES)
      for (size_t l = 0; l < LANES; l++) {
        float p = cpu_expf(row[j + l] - max);
        row[j + l] = p;
        lane[l] += p;
      }
  }
  float sum = 0.0f;
  for (size_t l = 0; l < LANES; l++) sum += lane[l];
  for (size_t j = body; j < n; j++) {
    row[j] = evicted && evicted[j] ? 0.0f : cpu_expf(row[j] - max);
    sum += row[j];
  }
  return sum;
}

/* Folds one tile of a row of scaled logits into the row's running max and
 * sum: row[j] becomes p_j = exp(row[j] - new max) for its first n_valid
 * entries (0 where evicted) and 0 up to width. Returns the factor
 * exp(old max - new max) that the row's output so far must be scaled by. */
static float tile_row_fold(float *row, size_t n_valid, size_t width, const unsigned char *evicted,
                           float *max, float *sum) {
  float tile_max = tile_row_max(row, evicted, n_valid);
  float old = *max, new_max = tile_max > old ? tile_max : old;
  float alpha = 1.0f;
  if (new_max == -INFINITY) { /* nothing kept yet: the output row is still 0 */
    n_valid = 0;
  } else {
    alpha = old == -INFINITY ? 0.0f : old == new_max ? 1.0f : cpu_expf(old - new_max);
    *sum = *sum * alpha + tile_row_exp(row, evicted, n_valid, new_max);
    *max = new_max;
  }
  if (width > n_valid) memset(row + n_valid, 0, (width - n_valid) * sizeof(float));
  return alpha;
}

/* A captured row: raw[p] holds the scaled logits of keys p < n_valid; they
 * become exp(z - max) / sum (0 where evicted) and 0 up to n_total. */
static void captured_row_finish(float *raw, size_t n_valid, size_t n_total,
                                const unsigned char *evicted, float max, float inv_sum) {
  for (size_t p = 0; p < n_valid; p++)
    raw[p] = evicted && evicted[p] ? 0.0f : cpu_expf(raw[p] - max) * inv_sum;
  memset(raw + n_valid, 0, (n_total - n_valid) * sizeof(float));
}

/* 1 when every key of [k0, k0 + n) is evicted. */
static int tile_all_evicted(const unsigned char *evicted, size_t k0, size_t n) {
  if (!evicted) return 0;
  for (size_t p = k0; p < k0 + n; p++)
    if (!evicted[p]) return 0;
  return 1;
}

/* What every item shares. */
typedef struct {
  const CpuAttentionShape *s;
  const float *q, *k, *v;
  float *out, *lse;
  const CpuAttentionRows *rows;
  float scale;
  size_t tile;  /* keys per tile: KEY_TILE, or all keys for one query */
  size_t stack; /* query heads of a group per item (1 for one query) */
} AttentionJob;

/* S (nq, kn) = scale * Q_blk K_tile^T; sgemv for a single query. */
static void tile_scores(const AttentionJob *j, const float *q, size_t ldq, const float *k,
                        size_t nq, size_t kn, float *scores) {
  int hd = (int)j->s->head_dim;
  if (nq == 1)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)kn, hd, j->scale, k, hd, q, 1, 0.0f, scores, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)kn, hd, j->scale, q,
                (int)ldq, k, hd, 0.0f, scores, (int)kn);
}

/* O (nq, head_dim) = P V_tile + beta O; sgemv for a single query. */
static void tile_values(const AttentionJob *j, const float *p, const float *v, size_t nq, size_t kn,
                        float beta, float *o, size_t ldo) {
  int hd = (int)j->s->head_dim;
  if (nq == 1)
    cblas_sgemv(CblasRowMajor, CblasTrans, (int)kn, hd, 1.0f, v, hd, p, 1, beta, o, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, hd, (int)kn, 1.0f, p, (int)kn,
                v, hd, beta, o, (int)ldo);
}

/* One item: query heads [h0, h0 + nh) of one KV group, queries [t0, t0 +
 * nq). Its nh * nq rows are stacked query-major (row i: query i / nh, head
 * h0 + i % nh), so each K and V tile serves the whole stack in one GEMM.
 * scratch: (nh * nq, tile) scores, then for nh > 1 the stacked Q and O
 * (nh * nq, head_dim) each. Adds its sgemm seconds to *gemm_time. */
static void attention_item(const AttentionJob *j, size_t h0, size_t nh, size_t t0, size_t nq,
                           float *scratch, double *gemm_time) {
  const CpuAttentionShape *s = j->s;
  size_t hd = s->head_dim, q_dim = s->n_heads * hd, g = h0 / (s->n_heads / s->n_kv_heads);
  size_t first = s->pos0 + t0;      /* position of the item's first query */
  size_t n_keys = first + nq;       /* keys [0, n_keys): tiles after it are all masked */
  size_t max_keys = s->pos0 + s->n; /* row length of a captured attention row */
  size_t m = nh * nq;               /* stacked rows */
  const float *kh = j->k + g * s->kv_stride * hd, *vh = j->v + g * s->kv_stride * hd;
  const unsigned char *evicted = s->evicted ? s->evicted + g * s->kv_stride : NULL;
  const int32_t *row_of = j->rows ? j->rows->row_of + t0 : NULL;
  float *scores = scratch;
  /* one head: Q and O in place (row stride q_dim); else stacked copies */
  const float *q = j->q + t0 * q_dim + h0 * hd;
  float *o = j->out + t0 * q_dim + h0 * hd;
  size_t ld = q_dim;
  if (nh > 1) {
    float *qs = scratch + m * j->tile;
    for (size_t r = 0; r < nq; r++)
      memcpy(qs + r * nh * hd, q + r * q_dim, nh * hd * sizeof(float));
    q = qs, o = qs + m * hd, ld = hd;
  }
  RowState st;
  for (size_t i = 0; i < m; i++) st.max[i] = -INFINITY, st.sum[i] = 0.0f;

  int started = 0; /* o holds a partial sum */
  for (size_t k0 = 0; k0 < n_keys; k0 += j->tile) {
    size_t kn = n_keys - k0 < j->tile ? n_keys - k0 : j->tile;
    if (tile_all_evicted(evicted, k0, kn)) continue; /* every p of the tile is 0 */
    double start = obc_now_seconds();
    tile_scores(j, q, ld, kh + k0 * hd, m, kn, scores);
    *gemm_time += obc_now_seconds() - start;
    int rescale = 0;
    for (size_t i = 0; i < m; i++) {
      float *row = scores + i * kn;
      size_t r = i / nh, own = first + r + 1; /* keys [0, own) are causal for row i */
      size_t n_valid = own <= k0 ? 0 : own - k0 < kn ? own - k0 : kn;
      if (row_of && row_of[r] >= 0) /* keep the raw logits; normalised at the end */
        memcpy(
            j->rows->attn + ((h0 + i % nh) * j->rows->n_rows + (size_t)row_of[r]) * max_keys + k0,
            row, n_valid * sizeof(float));
      st.alpha[i] =
          tile_row_fold(row, n_valid, kn, evicted ? evicted + k0 : NULL, &st.max[i], &st.sum[i]);
      rescale |= st.alpha[i] != 1.0f;
    }
    if (started && rescale)
      for (size_t i = 0; i < m; i++)
        if (st.alpha[i] != 1.0f)
          for (size_t c = 0; c < hd; c++) o[i * ld + c] *= st.alpha[i];
    start = obc_now_seconds();
    tile_values(j, scores, vh + k0 * hd, m, kn, started ? 1.0f : 0.0f, o, ld);
    *gemm_time += obc_now_seconds() - start;
    started = 1;
  }

  for (size_t i = 0; i < m; i++) {
    size_t r = i / nh, h = h0 + i % nh;
    float inv = 1.0f / st.sum[i], *dst = j->out + (t0 + r) * q_dim + h * hd;
    if (!started) memset(o + i * ld, 0, hd * sizeof(float));
    for (size_t c = 0; c < hd; c++) dst[c] = o[i * ld + c] * inv;
    j->lse[h * s->n + t0 + r] = st.max[i] + logf(st.sum[i]);
    if (row_of && row_of[r] >= 0)
      captured_row_finish(j->rows->attn + (h * j->rows->n_rows + (size_t)row_of[r]) * max_keys,
                          first + r + 1, max_keys, evicted, st.max[i], inv);
  }
}

/* The two-pass reference: one item's whole score rows (nq, n_keys) from one
 * sgemm, a stable softmax per row, one sgemm with V. */
static void two_pass_item(const AttentionJob *j, size_t h, size_t nh, size_t t0, size_t nq,
                          float *scores, double *gemm_time) {
  (void)nh; /* always 1 */
  const CpuAttentionShape *s = j->s;
  size_t hd = s->head_dim, q_dim = s->n_heads * hd, g = h / (s->n_heads / s->n_kv_heads);
  size_t n_keys = s->pos0 + t0 + nq, max_keys = s->pos0 + s->n;
  const unsigned char *evicted = s->evicted ? s->evicted + g * s->kv_stride : NULL;
  double start = obc_now_seconds();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)n_keys, (int)hd, j->scale,
              j->q + t0 * q_dim + h * hd, (int)q_dim, j->k + g * s->kv_stride * hd, (int)hd, 0.0f,
              scores, (int)n_keys);
  *gemm_time += obc_now_seconds() - start;
  for (size_t r = 0; r < nq; r++) {
    float *row = scores + r * n_keys;
    size_t n_valid = s->pos0 + t0 + r + 1;
    float max = tile_row_max(row, evicted, n_valid);
    float sum = tile_row_exp(row, evicted, n_valid, max), inv = 1.0f / sum;
    for (size_t p = 0; p < n_valid; p++) row[p] *= inv;
    memset(row + n_valid, 0, (n_keys - n_valid) * sizeof(float));
    j->lse[h * s->n + t0 + r] = max + logf(sum);
    int32_t captured = j->rows ? j->rows->row_of[t0 + r] : -1;
    if (captured >= 0) {
      float *dst = j->rows->attn + (h * j->rows->n_rows + (size_t)captured) * max_keys;
      memcpy(dst, row, n_keys * sizeof(float));
      memset(dst + n_keys, 0, (max_keys - n_keys) * sizeof(float));
    }
  }
  start = obc_now_seconds();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)hd, (int)n_keys, 1.0f,
              scores, (int)n_keys, j->v + g * s->kv_stride * hd, (int)hd, 0.0f,
              j->out + t0 * q_dim + h * hd, (int)q_dim);
  *gemm_time += obc_now_seconds() - start;
}

typedef void (*AttentionItemFn)(const AttentionJob *j, size_t h0, size_t nh, size_t t0, size_t nq,
                                float *scratch, double *gemm_time);

/* Runs every (stack of heads, block) item of the job over the OpenMP
 * threads. Items are handed out last block first: the blocks with the most
 * keys start early and the short ones fill the end, so threads finish
 * together. */
static int attention_run(const AttentionJob *job, AttentionItemFn item_fn, double *gemm_seconds) {
  const CpuAttentionShape *s = job->s;
  size_t group = s->n_heads / s->n_kv_heads, stacks = (group + job->stack - 1) / job->stack;
  size_t n_blocks = (s->n + BLOCK - 1) / BLOCK;
  size_t n_stacks = s->n_kv_heads * stacks, n_items = n_stacks * n_blocks;
  size_t rows = job->stack * (s->n < BLOCK ? s->n : BLOCK); /* 1 for a decode step */
  size_t per_thread = rows * job->tile + (job->stack > 1 ? 2 * rows * s->head_dim : 0);
  int n_threads = omp_get_max_threads();
  float *scratch = obc_malloc((size_t)n_threads * per_thread * sizeof(float), "attention scores");
  double *gemm_time = obc_calloc((size_t)n_threads, sizeof(double), "attention timers");
  if (!scratch || !gemm_time) {
    free(scratch);
    free(gemm_time);
    return OBC_ENOMEM;
  }

#pragma omp parallel for schedule(dynamic, 1)
  for (size_t item = 0; item < n_items; item++) {
    size_t unit = item % n_stacks, t0 = (n_blocks - 1 - item / n_stacks) * BLOCK;
    size_t g = unit / stacks, first = unit % stacks * job->stack;
    size_t nh = group - first < job->stack ? group - first : job->stack;
    size_t nq = s->n - t0 < BLOCK ? s->n - t0 : BLOCK;
    int thread = omp_get_thread_num();
    item_fn(job, g * group + first, nh, t0, nq, scratch + (size_t)thread * per_thread,
            &gemm_time[thread]);
  }
  /* Threads share the wall time: count the mean sgemm time per thread. */
  double total = 0.0;
  for (int t = 0; t < n_threads; t++) total += gemm_time[t];
  *gemm_seconds += total / n_threads;
  free(scratch);
  free(gemm_time);
  return OBC_OK;
}

static AttentionJob job_of(const CpuAttentionShape *s, const float *q, const float *k,
                           const float *v, float *out, float *lse, const CpuAttentionRows *rows) {
  return (AttentionJob){.s = s,
                        .q = q,
                        .k = k,
                        .v = v,
                        .out = out,
                        .lse = lse,
                        .rows = rows,
                        .scale = (float)(1.0 / sqrt((double)s->head_dim)),
                        /* one query: one tile of all its keys (no rescaling) */
                        .tile = s->n == 1 ? s->pos0 + 1 : KEY_TILE,
                        .stack = 1};
}

int cpu_attention(const CpuAttentionShape *s, const float *q, const float *k, const float *v,
                  float *out, float *lse, const CpuAttentionRows *rows, double *gemm_seconds) {
  AttentionJob job = job_of(s, q, k, v, out, lse, rows);
  size_t group = s->n_heads / s->n_kv_heads;
  if (s->n > 1) job.stack = group < STACK ? group : STACK;
  return attention_run(&job, attention_item, gemm_seconds);
}

int cpu_attention_two_pass(const CpuAttentionShape *s, const float *q, const float *k,
                           const float *v, float *out, float *lse, const CpuAttentionRows *rows,
                           double *gemm_seconds) {
  AttentionJob job = job_of(s, q, k, v, out, lse, rows);
  job.tile = s->pos0 + s->n; /* whole rows */
  return attention_run(&job, two_pass_item, gemm_seconds);
}
