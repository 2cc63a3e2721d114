/* Column sums of every prompt row (capture/capture_sums.h). Per layer and
 * query head, rows come in blocks of SUMS_BLOCK: one sgemm gives the block's
 * logits z = scale Q K^T against every causal key, one more v.o = O V^T,
 * and each pair then adds its terms to the position's accumulators in double.
 * The one pair of a row with A_ip > 1/2 (o_i is then close to v_p, and
 * vv - 2 v.o + oo would cancel) takes dd and v.(v - o) from the vectors
 * instead. Heads are spread over threads, each head's sums added in one
 * fixed order: results do not depend on the thread count. */
#include "capture/capture_sums.h"

#include <assert.h>
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "runtime/cpu_ops.h"

enum { SUMS_BLOCK = 32 };

int capture_sums_init(CaptureSums *s, size_t n_layers, size_t n_heads, size_t n_kv_heads,
                      size_t head_dim, size_t n_prompt, size_t agnostic_rows, float scale) {
  assert(n_heads % n_kv_heads == 0 && agnostic_rows <= n_prompt);
  memset(s, 0, sizeof *s);
  s->n_layers = n_layers;
  s->n_heads = n_heads;
  s->n_kv_heads = n_kv_heads;
  s->head_dim = head_dim;
  s->n_prompt = n_prompt;
  s->agnostic_rows = agnostic_rows;
  s->scale = scale;
  size_t plane = n_heads * n_prompt;
  s->attn = obc_calloc(n_layers * TRACE_ROWS_VARIANTS * plane, sizeof *s->attn, "column sums");
  s->obc = obc_calloc(n_layers * TRACE_ROWS_VARIANTS * TRACE_OBC_TERMS * plane, sizeof *s->obc,
                      "OBCache column sums");
  s->vv = obc_calloc(n_layers * n_kv_heads * n_prompt, sizeof *s->vv, "value norms");
  s->counts = obc_calloc(TRACE_ROWS_VARIANTS * n_prompt, sizeof *s->counts, "column counts");
  if (!s->attn || !s->obc || !s->vv || !s->counts) {
    capture_sums_free(s);
    return OBC_ENOMEM;
  }
  return OBC_OK;
}

void capture_sums_free(CaptureSums *s) {
  free(s->attn);
  free(s->obc);
  free(s->vv);
  free(s->counts);
  memset(s, 0, sizeof *s);
}

const double *capture_sums_attn(const CaptureSums *s, size_t layer) {
  return s->attn + layer * TRACE_ROWS_VARIANTS * s->n_heads * s->n_prompt;
}

const double *capture_sums_obc(const CaptureSums *s, size_t layer) {
  return s->obc + layer * TRACE_ROWS_VARIANTS * TRACE_OBC_TERMS * s->n_heads * s->n_prompt;
}

/* The running (all-rows) sums of (layer, head) become the agnostic ones. */
static void snapshot_agnostic(CaptureSums *s, size_t layer, size_t h) {
  size_t n = s->n_prompt, plane = s->n_heads * n;
  double *attn = s->attn + layer * TRACE_ROWS_VARIANTS * plane;
  memcpy(attn + h * n, attn + plane + h * n, n * sizeof *attn);
  double *obc = s->obc + layer * TRACE_ROWS_VARIANTS * TRACE_OBC_TERMS * plane;
  for (size_t t = 0; t < TRACE_OBC_TERMS; t++)
    memcpy(obc + t * plane + h * n, obc + (TRACE_OBC_TERMS + t) * plane + h * n,
           n * sizeof *obc);
}

static double dot_double(const float *x, const float *y, size_t n) {
  double sum = 0.0;
  for (size_t c = 0; c < n; c++) sum += (double)x[c] * y[c];
  return sum;
}

/* Rows [r0, r0 + nr) of the view (positions i0 .. i0 + nr - 1) for query
 * head h. z, vo: scratch (SUMS_BLOCK, i0 + nr) each. */
static void add_block(CaptureSums *s, const RuntimeLayerCapture *view, const float *K,
                      const float *V, size_t h, size_t r0, size_t nr, float *z, float *vo) {
  size_t hd = s->head_dim, n = s->n_prompt, plane = s->n_heads * n, layer = view->layer;
  size_t i0 = view->row_positions[r0], n_keys = i0 + nr;
  size_t g = h / (s->n_heads / s->n_kv_heads);
  const float *q = view->q + (h * view->n_rows + r0) * hd;
  const float *o = view->o + (h * view->n_rows + r0) * hd;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)n_keys, (int)hd, s->scale, q,
              (int)hd, K, (int)hd, 0.0f, z, (int)n_keys);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)n_keys, (int)hd, 1.0f, o,
              (int)hd, V, (int)hd, 0.0f, vo, (int)n_keys);
  const double *vv = s->vv + (layer * s->n_kv_heads + g) * n;
  double *attn = s->attn + (layer * TRACE_ROWS_VARIANTS + TRACE_ROWS_ALL) * plane + h * n;
  double *obc = s->obc + (layer * TRACE_ROWS_VARIANTS + TRACE_ROWS_ALL) * TRACE_OBC_TERMS * plane;
  double *obc_v = obc + TRACE_OBC_V * plane + h * n;
  double *obc_k = obc + TRACE_OBC_K * plane + h * n;
  double *obc_vk = obc + TRACE_OBC_VK * plane + h * n;
  for (size_t r = 0; r < nr; r++) {
    size_t i = i0 + r;
    if (i == s->agnostic_rows) snapshot_agnostic(s, layer, h);
    const float *zr = z + r * n_keys, *vor = vo + r * n_keys, *oi = o + r * hd;
    float lse = view->lse[h * view->n_rows + r0 + r];
    double oo = dot_double(oi, oi, hd);
    size_t dominant = n; /* the pair with a > 1/2, if any */
    /* Legend: a = A_ip, x = z_ip, w = v_p.o_i, dd = ||v_p - o_i||^2,
     * vd = v_p.(v_p - o_i); obc_vk's pair term is a^2 (vv + x^2 dd + 2 x vd). */
    for (size_t p = 0; p <= i; p++) {
      double a = cpu_expf(zr[p] - lse), x = zr[p], w = vor[p];
      double dd = vv[p] - 2.0 * w + oo, vd = vv[p] - w, a2 = a * a;
      dominant = a > 0.5 ? p : dominant;
      attn[p] += a;
      obc_v[p] += a2 * vv[p];
      obc_k[p] += a2 * x * x * dd;
      obc_vk[p] += a2 * (vv[p] + x * x * dd + 2.0 * x * vd);
    }
    if (dominant < n) { /* replace its cancelling terms by the direct ones */
      size_t p = dominant;
      const float *vp = V + p * hd;
      double a = cpu_expf(zr[p] - lse), x = zr[p], w = vor[p], a2 = a * a;
      double dd_fast = vv[p] - 2.0 * w + oo, vd_fast = vv[p] - w, dd = 0.0, vd = 0.0;
      for (size_t c = 0; c < hd; c++) {
        double diff = (double)vp[c] - oi[c];
        dd += diff * diff;
        vd += (double)vp[c] * diff;
      }
      obc_k[p] += a2 * x * x * (dd - dd_fast);
      obc_vk[p] += a2 * (x * x * (dd - dd_fast) + 2.0 * x * (vd - vd_fast));
    }
  }
}

int capture_sums_add(CaptureSums *s, const RuntimeLayerCapture *view, const RuntimeCache *cache) {
  size_t hd = s->head_dim, n = s->n_prompt, layer = view->layer;
  size_t rows = 0; /* the view's prompt rows: a prefix of its rows */
  while (rows < view->n_rows && view->row_positions[rows] < n) rows++;
  if (!rows) return OBC_OK;
  for (size_t r = 0; r < rows; r++) /* every prompt row, in order, from the chunk's start */
    assert(view->row_positions[r] == view->pos0 + r);
  size_t last = view->pos0 + rows; /* keys [0, last) */
  for (size_t g = 0; g < s->n_kv_heads; g++) {
    const float *V = runtime_cache_v(cache, layer, g);
    for (size_t p = view->pos0; p < last; p++)
      s->vv[(layer * s->n_kv_heads + g) * n + p] = dot_double(V + p * hd, V + p * hd, hd);
  }
  if (layer == 0)
    for (size_t i = view->pos0; i < last; i++) {
      if (i == s->agnostic_rows) memcpy(s->counts, s->counts + n, n * sizeof *s->counts);
      for (size_t p = 0; p <= i; p++) s->counts[n + p]++;
    }
  size_t per_thread = 2 * SUMS_BLOCK * last;
  int n_threads = omp_get_max_threads();
  float *scratch =
      obc_malloc((size_t)n_threads * per_thread * sizeof *scratch, "column sum logits");
  if (!scratch) return OBC_ENOMEM;
  size_t n_blocks = (rows + SUMS_BLOCK - 1) / SUMS_BLOCK;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t h = 0; h < s->n_heads; h++) {
    float *z = scratch + (size_t)omp_get_thread_num() * per_thread, *vo = z + SUMS_BLOCK * last;
    size_t g = h / (s->n_heads / s->n_kv_heads);
    const float *K = runtime_cache_k(cache, layer, g), *V = runtime_cache_v(cache, layer, g);
    for (size_t b = 0; b < n_blocks; b++) {
      size_t r0 = b * SUMS_BLOCK, nr = rows - r0 < SUMS_BLOCK ? rows - r0 : SUMS_BLOCK;
      add_block(s, view, K, V, h, r0, nr, z, vo);
    }
  }
  free(scratch);
  return OBC_OK;
}

void capture_sums_finish(CaptureSums *s) {
  if (s->agnostic_rows < s->n_prompt) return; /* taken when the question's first row came */
  for (size_t layer = 0; layer < s->n_layers; layer++)
    for (size_t h = 0; h < s->n_heads; h++) snapshot_agnostic(s, layer, h);
  memcpy(s->counts, s->counts + s->n_prompt, s->n_prompt * sizeof *s->counts);
}
