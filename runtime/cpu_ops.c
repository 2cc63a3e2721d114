/* Element-wise kernels of the CPU forward pass and its weight GEMM. Each
 * element-wise kernel is a loop over rows (or elements) split over OpenMP
 * threads; sums are accumulated in double so that the result does not depend
 * on the thread count. cpu_gemm_weight dispatches on the matrix's stored type
 * (docs/SCIENCE.md, "Stored-type weights"). */
#include "runtime/cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "common/obc_time.h"
#include "formats/gguf.h"
#include "formats/quant_dot.h"

/* Below this many elements a kernel runs on one thread: waking the team costs
 * more than the work (one decode token). */
enum { PARALLEL_MIN = 1 << 15 };

void cpu_rmsnorm(float *out, const float *x, const float *weight, size_t n, size_t dim,
                 double eps) {
#pragma omp parallel for schedule(static) if (n * dim >= PARALLEL_MIN)
  for (size_t t = 0; t < n; t++) {
    const float *row = x + t * dim;
    double sum = 0.0;
    for (size_t i = 0; i < dim; i++) sum += (double)row[i] * row[i];
    float scale = (float)(1.0 / sqrt(sum / (double)dim + eps));
    float *dst = out + t * dim;
    for (size_t i = 0; i < dim; i++) dst[i] = row[i] * scale * weight[i];
  }
}

void cpu_rope(float *x, size_t n, size_t n_heads, size_t head_dim, size_t pos0,
              const float *cos_table, const float *sin_table, int interleaved) {
  size_t half = head_dim / 2;
#pragma omp parallel for schedule(static) if (n * n_heads * head_dim >= PARALLEL_MIN)
  for (size_t t = 0; t < n; t++) {
    const float *c = cos_table + (pos0 + t) * half;
    const float *s = sin_table + (pos0 + t) * half;
    for (size_t h = 0; h < n_heads; h++) {
      float *head = x + (t * n_heads + h) * head_dim;
      for (size_t i = 0; i < half; i++) {
        size_t a = interleaved ? 2 * i : i;
        size_t b = interleaved ? 2 * i + 1 : i + half;
        float x0 = head[a], x1 = head[b];
        head[a] = x0 * c[i] - x1 * s[i];
        head[b] = x0 * s[i] + x1 * c[i];
      }
    }
  }
}

void cpu_swiglu(float *gate, const float *up, size_t count) {
#pragma omp parallel for schedule(static) if (count >= PARALLEL_MIN)
  for (size_t i = 0; i < count; i++) {
    float g = gate[i];
    gate[i] = g / (1.0f + cpu_expf(-g)) * up[i];
  }
}

void cpu_embed(float *out, const ModelMatrix *table, const int32_t *tokens, size_t n) {
  size_t dim = table->cols;
  for (size_t t = 0; t < n; t++) {
    const char *row = (const char *)table->data + (size_t)tokens[t] * table->row_bytes;
    if (table->type == MODEL_MATRIX_F32)
      memcpy(out + t * dim, row, dim * sizeof(float));
    else
      dequant_gguf(table->type, row, out + t * dim, dim); /* one row: below its OpenMP bound */
  }
}

void cpu_add_bias(float *rows, const float *bias, size_t n, size_t width) {
#pragma omp parallel for schedule(static) if (n * width >= PARALLEL_MIN)
  for (size_t t = 0; t < n; t++)
    for (size_t i = 0; i < width; i++) rows[t * width + i] += bias[i];
}

void cpu_attention_inputs(const ModelConfig *c, const ModelLayerWeights *w, float *q, float *k,
                          float *v, size_t n) {
  size_t q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
  if (w->bq) cpu_add_bias(q, w->bq, n, q_dim);
  if (w->bk) cpu_add_bias(k, w->bk, n, kv_dim);
  if (w->bv) cpu_add_bias(v, w->bv, n, kv_dim);
  /* a row of heads is n_heads rows of head_dim: one RMSNorm row per head */
  if (w->q_norm) cpu_rmsnorm(q, q, w->q_norm, n * c->n_heads, c->head_dim, c->norm_eps);
  if (w->k_norm) cpu_rmsnorm(k, k, w->k_norm, n * c->n_kv_heads, c->head_dim, c->norm_eps);
}

/* Output rows per quant_dot_rows call in the decode path, and fp32 elements
 * of one dequantised tile (1 MB per thread) in the prefill path. */
enum { DOT_ROWS = 32, TILE_FLOATS = 1 << 18, TILE_MAX_ROWS = 64 };

static void gemm_f32(float *c, const float *a, const ModelMatrix *w, size_t n, float beta) {
  const float *data = w->data;
  int in = (int)w->cols, out = (int)w->rows, ld = (int)(w->row_bytes / sizeof(float));
  if (n == 1) /* one decode token: a matrix-vector product */
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, data, ld, a, 1, beta, c, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, out, in, 1.0f, a, in, data, ld,
                beta, c, out);
}

/* n <= CPU_GEMM_DOT_MAX_ROWS: blocks of DOT_ROWS output rows over threads. */
static void gemm_dot(float *c, const float *a, const ModelMatrix *w, size_t n, float beta) {
  size_t rows = w->rows, out = w->rows, n_blocks = (rows + DOT_ROWS - 1) / DOT_ROWS;
#pragma omp parallel for schedule(static) if (rows * w->cols >= PARALLEL_MIN)
  for (size_t blk = 0; blk < n_blocks; blk++) {
    float y[CPU_GEMM_DOT_MAX_ROWS * DOT_ROWS]; /* (n, DOT_ROWS) */
    size_t r0 = blk * DOT_ROWS, count = rows - r0 < DOT_ROWS ? rows - r0 : DOT_ROWS;
    quant_dot_rows(w->type, (const char *)w->data + r0 * w->row_bytes, w->row_bytes, w->cols, count,
                   a, n, y, DOT_ROWS);
    for (size_t b = 0; b < n; b++)
      for (size_t r = 0; r < count; r++) {
        float *dst = c + b * out + r0 + r;
        *dst = beta == 0.0f ? y[b * DOT_ROWS + r] : y[b * DOT_ROWS + r] + beta * *dst;
      }
  }
}

#ifdef _OPENMP
static int max_threads(void) { return omp_get_max_threads(); }
static int thread_id(void) { return omp_get_thread_num(); }
#else
static int max_threads(void) { return 1; }
static int thread_id(void) { return 0; }
#endif

/* n > CPU_GEMM_DOT_MAX_ROWS: tiles of whole weight rows dequantised into a
 * per-thread buffer, each multiplied by one sgemm (OpenBLAS runs on one
 * thread inside the parallel region). False when the scratch cannot be had.
 * A tile holds at most TILE_FLOATS weights and TILE_MAX_ROWS rows, so that a
 * small matrix (SmolLM2's K and V projections: 192 rows) still gives every
 * thread work: with 1 MB tiles alone, prefill at 2 threads ran at 784 / 639
 * tokens/s (512 / 2048 tokens), with 64-row tiles at 870 / 708, for 3 % less
 * at 1 thread (bench_model). Tile bounds depend on the matrix only, never on
 * the thread count. */
static bool gemm_tiles(float *c, const float *a, const ModelMatrix *w, size_t n, float beta) {
  size_t cols = w->cols, rows = w->rows;
  size_t tile = TILE_FLOATS / cols / 8 * 8;
  if (tile < 8) tile = 8;
  if (tile > TILE_MAX_ROWS) tile = TILE_MAX_ROWS;
  if (tile > rows) tile = rows;
  size_t n_tiles = (rows + tile - 1) / tile, threads = (size_t)max_threads();
  float *scratch = NULL;
  if (posix_memalign((void **)&scratch, 64, threads * tile * cols * sizeof(float))) return false;
#pragma omp parallel for schedule(dynamic, 1) num_threads((int)threads)
  for (size_t t = 0; t < n_tiles; t++) {
    float *buffer = scratch + (size_t)thread_id() * tile * cols;
    size_t r0 = t * tile, count = rows - r0 < tile ? rows - r0 : tile;
    dequant_gguf(w->type, (const char *)w->data + r0 * w->row_bytes, buffer, count * cols);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)count, (int)cols, 1.0f, a,
                (int)cols, buffer, (int)cols, beta, c + r0, (int)rows);
  }
  free(scratch);
  return true;
}

void cpu_gemm_weight_path(float *c, const float *a, const ModelMatrix *w, size_t n, float beta,
                          CpuGemmPath path) {
  if (path == CPU_GEMM_AUTO) path = n > CPU_GEMM_DOT_MAX_ROWS ? CPU_GEMM_TILES : CPU_GEMM_DOT;
  if (w->type == MODEL_MATRIX_F32)
    gemm_f32(c, a, w, n, beta);
  else if (path == CPU_GEMM_TILES && gemm_tiles(c, a, w, n, beta))
    ;
  else /* decode, or no memory for tiles: up to CPU_GEMM_DOT_MAX_ROWS vectors at a time */
    for (size_t done = 0; done < n; done += CPU_GEMM_DOT_MAX_ROWS) {
      size_t count = n - done < CPU_GEMM_DOT_MAX_ROWS ? n - done : CPU_GEMM_DOT_MAX_ROWS;
      gemm_dot(c + done * w->rows, a + done * w->cols, w, count, beta);
    }
}

void cpu_gemm_weight(float *c, const float *a, const ModelMatrix *w, size_t n, float beta,
                     double *seconds) {
  double start = obc_now_seconds();
  cpu_gemm_weight_path(c, a, w, n, beta, CPU_GEMM_AUTO);
  *seconds += obc_now_seconds() - start;
}
