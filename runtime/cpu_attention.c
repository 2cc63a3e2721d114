/* Causal GQA attention on the CPU, as one tiled online-softmax pass
 * (docs/SCIENCE.md, "Attention in one pass"). Work is split into (query head,
 * block of BLOCK queries) items over OpenMP threads; each item walks the keys
 * in tiles of KEY_TILE in a fixed order and runs its GEMMs single-threaded
 * (OpenBLAS does so inside a parallel region), so the result of an item does
 * not depend on which thread ran it or how many there are. */
#include "runtime/cpu_attention.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_cli.h"
#include "common/obc_error.h"
#include "runtime/cpu_ops.h"

/* KEY_TILE keys per tile: an item's working set per tile, the score tile
 * (BLOCK x KEY_TILE floats, 64 KiB) and the K and V tiles (KEY_TILE x
 * head_dim, 64 KiB each at head_dim 64), is 192 KiB and stays in L2 (256 KiB
 * and up on x86-64 cores) from the score GEMM through the softmax to the P V
 * GEMM, where the former whole BLOCK x n_keys score block (1 MiB at 4096
 * keys) went out to the shared L3 between passes. Longer tiles amortise the
 * per-call GEMM overhead and the output rescaling: with a 1 MiB L2, 512
 * measured 1-2% faster than 256, 128 3% and 64 10% slower (SmolLM2 shapes). */
enum { BLOCK = 64, KEY_TILE = 256, LANES = 16 };

/* Running state of one item's rows (at most BLOCK). */
typedef struct {
  float max[BLOCK]; /* running max of the kept logits; -inf while none */
  float sum[BLOCK]; /* running sum of exp(logit - max) */
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
 * their sum, over 16 lanes in a fixed order. */
static float tile_row_exp(float *row, const unsigned char *evicted, size_t n, float max) {
  if (evicted) {
    for (size_t j = 0; j < n; j++) row[j] = evicted[j] ? 0.0f : cpu_expf(row[j] - max);
  } else {
    for (size_t j = 0; j < n; j++) row[j] = cpu_expf(row[j] - max);
  }
  float lane[LANES] = {0};
  size_t body = n / LANES * LANES;
  for (size_t j = 0; j < body; j += LANES)
    for (size_t l = 0; l < LANES; l++) lane[l] += row[j + l];
  float sum = 0.0f;
  for (size_t l = 0; l < LANES; l++) sum += lane[l];
  for (size_t j = body; j < n; j++) sum += row[j];
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
  size_t tile; /* keys per tile: KEY_TILE, or all keys for one query */
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

/* One item: query head h, queries [t0, t0 + nq). scores: (nq, tile)
 * scratch. Adds its sgemm seconds to *gemm_time. */
static void attention_item(const AttentionJob *j, size_t h, size_t t0, size_t nq, float *scores,
                           double *gemm_time) {
  const CpuAttentionShape *s = j->s;
  size_t hd = s->head_dim, q_dim = s->n_heads * hd, g = h / (s->n_heads / s->n_kv_heads);
  size_t first = s->pos0 + t0;      /* position of the item's first query */
  size_t n_keys = first + nq;       /* keys [0, n_keys): tiles after it are all masked */
  size_t max_keys = s->pos0 + s->n; /* row length of a captured attention row */
  const float *q = j->q + t0 * q_dim + h * hd;
  const float *kh = j->k + g * s->kv_stride * hd, *vh = j->v + g * s->kv_stride * hd;
  const unsigned char *evicted = s->evicted ? s->evicted + g * s->kv_stride : NULL;
  float *o = j->out + t0 * q_dim + h * hd;
  const int32_t *row_of = j->rows ? j->rows->row_of + t0 : NULL;
  RowState st;
  for (size_t r = 0; r < nq; r++) st.max[r] = -INFINITY, st.sum[r] = 0.0f;

  int started = 0; /* o holds a partial sum */
  for (size_t k0 = 0; k0 < n_keys; k0 += j->tile) {
    size_t kn = n_keys - k0 < j->tile ? n_keys - k0 : j->tile;
    if (tile_all_evicted(evicted, k0, kn)) continue; /* every p of the tile is 0 */
    double start = obc_now_seconds();
    tile_scores(j, q, q_dim, kh + k0 * hd, nq, kn, scores);
    *gemm_time += obc_now_seconds() - start;
    float alpha[BLOCK];
    int rescale = 0;
    for (size_t r = 0; r < nq; r++) {
      float *row = scores + r * kn;
      size_t own = first + r + 1; /* keys [0, own) are causal for row r */
      size_t n_valid = own <= k0 ? 0 : own - k0 < kn ? own - k0 : kn;
      if (row_of && row_of[r] >= 0) /* keep the raw logits; normalised at the end */
        memcpy(j->rows->attn + (h * j->rows->n_rows + (size_t)row_of[r]) * max_keys + k0, row,
               n_valid * sizeof(float));
      alpha[r] =
          tile_row_fold(row, n_valid, kn, evicted ? evicted + k0 : NULL, &st.max[r], &st.sum[r]);
      rescale |= alpha[r] != 1.0f;
    }
    if (started && rescale)
      for (size_t r = 0; r < nq; r++)
        if (alpha[r] != 1.0f)
          for (size_t i = 0; i < hd; i++) o[r * q_dim + i] *= alpha[r];
    start = obc_now_seconds();
    tile_values(j, scores, vh + k0 * hd, nq, kn, started ? 1.0f : 0.0f, o, q_dim);
    *gemm_time += obc_now_seconds() - start;
    started = 1;
  }

  for (size_t r = 0; r < nq; r++) {
    float inv = 1.0f / st.sum[r];
    if (!started) memset(o + r * q_dim, 0, hd * sizeof(float));
    for (size_t i = 0; i < hd; i++) o[r * q_dim + i] *= inv;
    j->lse[h * s->n + t0 + r] = st.max[r] + logf(st.sum[r]);
    if (row_of && row_of[r] >= 0)
      captured_row_finish(j->rows->attn + (h * j->rows->n_rows + (size_t)row_of[r]) * max_keys,
                          first + r + 1, max_keys, evicted, st.max[r], inv);
  }
}

/* The two-pass reference: one item's whole score rows (nq, n_keys) from one
 * sgemm, a stable softmax per row, one sgemm with V. */
static void two_pass_item(const AttentionJob *j, size_t h, size_t t0, size_t nq, float *scores,
                          double *gemm_time) {
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

typedef void (*AttentionItemFn)(const AttentionJob *j, size_t h, size_t t0, size_t nq,
                                float *scores, double *gemm_time);

/* Runs every (head, block) item of the job over the OpenMP threads; scratch
 * of block rows x tile floats per thread. */
static int attention_run(const AttentionJob *job, AttentionItemFn item_fn, double *gemm_seconds) {
  const CpuAttentionShape *s = job->s;
  size_t n_blocks = (s->n + BLOCK - 1) / BLOCK;
  size_t n_items = s->n_heads * n_blocks;
  size_t block_rows = s->n < BLOCK ? s->n : BLOCK; /* 1 for a decode step */
  int n_threads = omp_get_max_threads();
  float *scores =
      obc_malloc((size_t)n_threads * block_rows * job->tile * sizeof(float), "attention scores");
  double *gemm_time = obc_calloc((size_t)n_threads, sizeof(double), "attention timers");
  if (!scores || !gemm_time) {
    free(scores);
    free(gemm_time);
    return OBC_ENOMEM;
  }

#pragma omp parallel for schedule(dynamic, 1)
  for (size_t item = 0; item < n_items; item++) {
    size_t h = item / n_blocks, t0 = item % n_blocks * BLOCK;
    size_t nq = s->n - t0 < BLOCK ? s->n - t0 : BLOCK;
    int thread = omp_get_thread_num();
    item_fn(job, h, t0, nq, scores + (size_t)thread * block_rows * job->tile, &gemm_time[thread]);
  }
  /* Threads share the wall time: count the mean sgemm time per thread. */
  double total = 0.0;
  for (int t = 0; t < n_threads; t++) total += gemm_time[t];
  *gemm_seconds += total / n_threads;
  free(scores);
  free(gemm_time);
  return 0;
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
                        .tile = s->n == 1 ? s->pos0 + 1 : KEY_TILE};
}

int cpu_attention(const CpuAttentionShape *s, const float *q, const float *k, const float *v,
                  float *out, float *lse, const CpuAttentionRows *rows, double *gemm_seconds) {
  AttentionJob job = job_of(s, q, k, v, out, lse, rows);
  return attention_run(&job, attention_item, gemm_seconds);
}

int cpu_attention_two_pass(const CpuAttentionShape *s, const float *q, const float *k,
                           const float *v, float *out, float *lse, const CpuAttentionRows *rows,
                           double *gemm_seconds) {
  AttentionJob job = job_of(s, q, k, v, out, lse, rows);
  job.tile = s->pos0 + s->n; /* whole rows */
  return attention_run(&job, two_pass_item, gemm_seconds);
}
