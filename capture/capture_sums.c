/* Column sums of every prompt row (capture/capture_sums.h). Per layer and
 * query head, rows come in blocks of SUMS_BLOCK: one sgemm gives the block's
 * logits z = scale Q K^T against every causal key, one more v.o = O V^T,
 * and each pair adds its terms, in float, to the block's sums, which are
 * then added to the position's sums in double.
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

enum { SUMS_BLOCK = 64 };

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
    memcpy(obc + t * plane + h * n, obc + (TRACE_OBC_TERMS + t) * plane + h * n, n * sizeof *obc);
}

static double dot_double(const float *x, const float *y, size_t n) {
  double sum = 0.0;
  for (size_t c = 0; c < n; c++) sum += (double)x[c] * y[c];
  return sum;
}

/* Rows [r0, r0 + nr) of the view (positions i0 .. i0 + nr - 1) for query
 * head h, none of them straddling agnostic_rows. scratch: (SUMS_BLOCK, i0 +
 * nr) floats each for z and v.o, then the block's float accumulators
 * (SUMS_TERMS, i0 + nr) and the float ||v_p||^2 (i0 + nr). The pair terms
 * are computed and summed over the block's rows in float (vectorised), the
 * block's sums then added to the double ones. */
enum { SUMS_TERMS = 1 + TRACE_OBC_TERMS };
static void add_block(CaptureSums *s, const RuntimeLayerCapture *view, const float *K,
                      const float *V, size_t h, size_t r0, size_t nr, float *scratch) {
  size_t hd = s->head_dim, n = s->n_prompt, plane = s->n_heads * n, layer = view->layer;
  size_t i0 = view->row_positions[r0], n_keys = i0 + nr;
  size_t g = h / (s->n_heads / s->n_kv_heads);
  const float *q = view->q + (h * view->n_rows + r0) * hd;
  const float *o = view->o + (h * view->n_rows + r0) * hd;
  float *z = scratch, *vo = z + SUMS_BLOCK * n_keys, *acc = vo + SUMS_BLOCK * n_keys;
  float *vvf = acc + SUMS_TERMS * n_keys;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)n_keys, (int)hd, s->scale, q,
              (int)hd, K, (int)hd, 0.0f, z, (int)n_keys);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)n_keys, (int)hd, 1.0f, o,
              (int)hd, V, (int)hd, 0.0f, vo, (int)n_keys);
  const double *vv = s->vv + (layer * s->n_kv_heads + g) * n;
  for (size_t p = 0; p < n_keys; p++) vvf[p] = (float)vv[p];
  memset(acc, 0, SUMS_TERMS * n_keys * sizeof *acc);
  float *restrict acc_attn = acc, *restrict acc_v = acc + n_keys,
                  *restrict acc_k = acc + 2 * n_keys, *restrict acc_vk = acc + 3 * n_keys;
  if (i0 == s->agnostic_rows) snapshot_agnostic(s, layer, h);
  for (size_t r = 0; r < nr; r++) {
    size_t i = i0 + r;
    const float *zr = z + r * n_keys, *vor = vo + r * n_keys, *oi = o + r * hd;
    float lse = view->lse[h * view->n_rows + r0 + r];
    float oo = (float)dot_double(oi, oi, hd);
    /* Legend: a = A_ip, x = z_ip, w = v_p.o_i, dd = ||v_p - o_i||^2,
     * vd = v_p.(v_p - o_i); obc_vk's pair term is a^2 (vv + x^2 dd + 2 x vd). */
#pragma omp simd
    for (size_t p = 0; p <= i; p++) {
      float a = cpu_expf(zr[p] - lse), x = zr[p], w = vor[p], v2 = vvf[p];
      float dd = v2 - 2.0f * w + oo, vd = v2 - w, a2 = a * a, x2dd = x * x * dd;
      acc_attn[p] += a;
      acc_v[p] += a2 * v2;
      acc_k[p] += a2 * x2dd;
      acc_vk[p] += a2 * (v2 + x2dd + 2.0f * x * vd);
    }
    size_t top = 0; /* the largest logit: the one pair that may have a > 1/2 */
    for (size_t p = 1; p <= i; p++) top = zr[p] > zr[top] ? p : top;
    double a = cpu_expf(zr[top] - lse);
    if (a > 0.5) { /* replace its cancelling dd and vd by the direct ones */
      const float *vp = V + top * hd;
      float x = zr[top], w = vor[top], v2 = vvf[top];
      float dd_fast = v2 - 2.0f * w + oo, vd_fast = v2 - w;
      double dd = 0.0, vd = 0.0;
      for (size_t c = 0; c < hd; c++) {
        double diff = (double)vp[c] - oi[c];
        dd += diff * diff;
        vd += (double)vp[c] * diff;
      }
      double a2 = a * a, xd = x;
      acc_k[top] += (float)(a2 * xd * xd * (dd - dd_fast));
      acc_vk[top] += (float)(a2 * (xd * xd * (dd - dd_fast) + 2.0 * xd * (vd - vd_fast)));
    }
  }
  double *attn = s->attn + (layer * TRACE_ROWS_VARIANTS + TRACE_ROWS_ALL) * plane + h * n;
  double *obc = s->obc + (layer * TRACE_ROWS_VARIANTS + TRACE_ROWS_ALL) * TRACE_OBC_TERMS * plane;
  double *obc_v = obc + TRACE_OBC_V * plane + h * n;
  double *obc_k = obc + TRACE_OBC_K * plane + h * n;
  double *obc_vk = obc + TRACE_OBC_VK * plane + h * n;
  for (size_t p = 0; p < n_keys; p++) {
    attn[p] += acc_attn[p];
    obc_v[p] += acc_v[p];
    obc_k[p] += acc_k[p];
    obc_vk[p] += acc_vk[p];
  }
}

/* Row i counts once at every position p <= i; rows [i, stop) together count
 * stop - max(i, p) times at p < stop, taken up to where the agnostic rows end
 * (their counts are a copy made there). */
void capture_sums_count(CaptureSums *s, size_t first, size_t end) {
  size_t n = s->n_prompt;
  for (size_t i = first; i < end;) {
    if (i == s->agnostic_rows) memcpy(s->counts, s->counts + n, n * sizeof *s->counts);
    size_t stop = s->agnostic_rows > i && s->agnostic_rows < end ? s->agnostic_rows : end;
    for (size_t p = 0; p < stop; p++) s->counts[n + p] += (int64_t)(stop - (p > i ? p : i));
    i = stop;
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
  if (layer == 0) capture_sums_count(s, view->pos0, last);
  size_t per_thread = (2 * SUMS_BLOCK + SUMS_TERMS + 1) * last;
  int n_threads = omp_get_max_threads();
  float *scratch =
      obc_malloc((size_t)n_threads * per_thread * sizeof *scratch, "column sum logits");
  if (!scratch) return OBC_ENOMEM;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t h = 0; h < s->n_heads; h++) {
    float *mine = scratch + (size_t)omp_get_thread_num() * per_thread;
    size_t g = h / (s->n_heads / s->n_kv_heads);
    const float *K = runtime_cache_k(cache, layer, g), *V = runtime_cache_v(cache, layer, g);
    for (size_t r0 = 0; r0 < rows;) {
      /* blocks of SUMS_BLOCK rows, cut where the agnostic rows end */
      size_t i0 = view->pos0 + r0, nr = rows - r0 < SUMS_BLOCK ? rows - r0 : SUMS_BLOCK;
      if (i0 < s->agnostic_rows && i0 + nr > s->agnostic_rows) nr = s->agnostic_rows - i0;
      add_block(s, view, K, V, h, r0, nr, mine);
      r0 += nr;
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
