/* The C twins of twins.h: the reference each CUDA kernel without a CPU
 * backend counterpart is checked against, element by element. */
#include "runtime/cuda/twins.h"

#include <math.h>
#include <string.h>

#include "formats/float16.h"
#include "runtime/cpu_ops.h"

uint16_t twin_bf16_from_f32(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u); /* NaN */
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u); /* ties to even */
  return (uint16_t)((bits + rounding) >> 16);
}

void twin_to_bf16(uint16_t *out, const float *in, size_t count) {
  for (size_t i = 0; i < count; i++) out[i] = twin_bf16_from_f32(in[i]);
}

void twin_embed_bf16(float *out, const uint16_t *table, const int32_t *tokens, size_t n,
                     size_t dim) {
  for (size_t t = 0; t < n; t++)
    for (size_t d = 0; d < dim; d++)
      out[t * dim + d] = float16_bf16_to_f32(table[(size_t)tokens[t] * dim + d]);
}

void twin_argmax(int32_t *index, const float *x, size_t n_rows, size_t width) {
  for (size_t r = 0; r < n_rows; r++) {
    const float *row = x + r * width;
    size_t best = 0;
    for (size_t i = 1; i < width; i++)
      if (row[i] > row[best]) best = i;
    index[r] = (int32_t)best;
  }
}

void twin_store_kv(float *cache, const float *rows, size_t n, size_t n_kv_heads, size_t head_dim,
                   size_t kv_stride, size_t pos0) {
  for (size_t t = 0; t < n; t++)
    for (size_t g = 0; g < n_kv_heads; g++)
      memcpy(cache + (g * kv_stride + pos0 + t) * head_dim, rows + (t * n_kv_heads + g) * head_dim,
             head_dim * sizeof(float));
}

void twin_gather_rows(float *dst, const float *src, const int32_t *row_t, size_t n_rows,
                      size_t n_heads, size_t width) {
  for (size_t h = 0; h < n_heads; h++)
    for (size_t r = 0; r < n_rows; r++)
      memcpy(dst + (h * n_rows + r) * width, src + ((size_t)row_t[r] * n_heads + h) * width,
             width * sizeof(float));
}

void twin_gather_lse(float *dst, const float *lse, const int32_t *row_t, size_t n_rows,
                     size_t n_heads, size_t n) {
  for (size_t h = 0; h < n_heads; h++)
    for (size_t r = 0; r < n_rows; r++) dst[h * n_rows + r] = lse[h * n + (size_t)row_t[r]];
}

/* ---- the capture's device sums ---- */

float twin_dot_fma(const float *x, const float *y, size_t n) {
  float sum = 0.0f;
  for (size_t c = 0; c < n; c++) sum = fmaf(x[c], y[c], sum);
  return sum;
}

void twin_column_sums_add(const TwinSumsShape *sh, const float *q, const float *o, const float *lse,
                          const float *k, const float *v, size_t t_begin, size_t t_end,
                          double *attn, double *obc) {
  size_t hd = sh->head_dim, H = sh->n_heads, n = sh->n_prompt, group = H / sh->n_kv_heads;
  size_t n_keys = sh->pos0 + t_end; /* keys up to the last row's position */
  for (size_t h = 0; h < H; h++) {
    size_t g = h / group;
    for (size_t p = 0; p < n_keys; p++) {
      const float *kp = k + (g * sh->kv_stride + p) * hd, *vp = v + (g * sh->kv_stride + p) * hd;
      double vv = twin_dot_fma(vp, vp, hd);
      /* Legend: a = A_tp, z the scaled logit, dd = ||v_p - o_t||^2,
       * uu = ||v_p + z (v_p - o_t)||^2. */
      double sum_a = attn[h * n + p], sum_v = obc[h * n + p], sum_k = obc[(H + h) * n + p],
             sum_vk = obc[(2 * H + h) * n + p];
      size_t t0 = p > sh->pos0 + t_begin ? p - sh->pos0 : t_begin;
      for (size_t t = t0; t < t_end; t++) {
        const float *qt = q + (t * H + h) * hd, *ot = o + (t * H + h) * hd;
        float z = sh->scale * twin_dot_fma(qt, kp, hd);
        float a = cpu_expf(z - lse[h * sh->n + t]);
        float dd = 0.0f, uu = 0.0f;
        for (size_t c = 0; c < hd; c++) {
          float d = vp[c] - ot[c], u = fmaf(z, d, vp[c]);
          dd = fmaf(d, d, dd);
          uu = fmaf(u, u, uu);
        }
        double ad = a, zd = z, a2 = ad * ad, z2 = zd * zd;
        sum_a += ad;
        sum_v += a2 * vv;
        sum_k += a2 * z2 * (double)dd;
        sum_vk += a2 * (double)uu;
      }
      attn[h * n + p] = sum_a;
      obc[h * n + p] = sum_v;
      obc[(H + h) * n + p] = sum_k;
      obc[(2 * H + h) * n + p] = sum_vk;
    }
  }
}

double twin_unrope(const float *q, const float *cos_row, const float *sin_row, size_t head_dim,
                   int interleaved, size_t c) {
  size_t half = head_dim / 2, j = interleaved ? c / 2 : c % half;
  size_t a = interleaved ? 2 * j : j, b = interleaved ? 2 * j + 1 : j + half;
  double cs = cos_row[j], sn = sin_row[j], x0 = q[a], x1 = q[b];
  return c == a ? x0 * cs + x1 * sn : x1 * cs - x0 * sn;
}

void twin_query_stats_add(const TwinSumsShape *sh, const float *q, const float *cos_table,
                          const float *sin_table, int interleaved, size_t t_begin, size_t t_end,
                          double *sum, double *outer) {
  size_t hd = sh->head_dim, half = hd / 2, H = sh->n_heads;
  for (size_t h = 0; h < H; h++)
    for (size_t t = t_begin; t < t_end; t++) {
      const float *qt = q + (t * H + h) * hd;
      const float *cs = cos_table + (sh->pos0 + t) * half, *sn = sin_table + (sh->pos0 + t) * half;
      for (size_t c = 0; c < hd; c++) {
        double u = twin_unrope(qt, cs, sn, hd, interleaved, c);
        sum[h * hd + c] += u;
        for (size_t c2 = c; c2 < hd; c2++) {
          double product = u * twin_unrope(qt, cs, sn, hd, interleaved, c2);
          outer[(h * hd + c) * hd + c2] += product;
        }
      }
    }
}

TwinSumsPlan twin_sums_plan(const RuntimeSums *sums, size_t pos0, size_t n) {
  TwinSumsPlan plan = {0, 0, 0, 0};
  if (pos0 >= sums->n_prompt) return plan;
  plan.rows = sums->n_prompt - pos0 < n ? sums->n_prompt - pos0 : n;
  plan.cut = plan.rows;
  plan.snapshot = sums->agnostic_rows < sums->n_prompt && sums->agnostic_rows >= pos0 &&
                  sums->agnostic_rows < pos0 + plan.rows;
  if (plan.snapshot) plan.cut = sums->agnostic_rows - pos0;
  plan.stats_first = sums->qstats_first_row > pos0 ? sums->qstats_first_row - pos0 : 0;
  return plan;
}

void twin_sums_layer(const RuntimeSums *sums, const TwinSumsShape *sh, size_t layer, const float *q,
                     const float *o, const float *lse, const float *k, const float *v,
                     const float *cos_table, const float *sin_table, int interleaved) {
  size_t H = sh->n_heads, n = sh->n_prompt, hd = sh->head_dim;
  /* each array's one variant of one layer, in doubles */
  size_t variant[4] = {H * n, RUNTIME_SUMS_OBC_TERMS * H * n, H * hd, H * hd * hd};
  double *arrays[4] = {sums->attn, sums->obc, sums->q_sum, sums->q_outer};
  double *all[4];
  for (int i = 0; i < 4; i++)
    all[i] = arrays[i] + (layer * RUNTIME_SUMS_VARIANTS + RUNTIME_SUMS_ALL) * variant[i];
  TwinSumsPlan plan = twin_sums_plan(sums, sh->pos0, sh->n);
  size_t bounds[3] = {0, plan.cut, plan.rows};
  for (int part = 0; part < 2; part++) {
    if (part == 1 && plan.snapshot)
      for (int i = 0; i < 4; i++)
        memcpy(arrays[i] + (layer * RUNTIME_SUMS_VARIANTS + RUNTIME_SUMS_AGNOSTIC) * variant[i],
               all[i], variant[i] * sizeof(double));
    size_t begin = bounds[part], end = bounds[part + 1];
    if (begin >= end) continue;
    twin_column_sums_add(sh, q, o, lse, k, v, begin, end, all[0], all[1]);
    size_t first = plan.stats_first > begin ? plan.stats_first : begin;
    if (first < end)
      twin_query_stats_add(sh, q, cos_table, sin_table, interleaved, first, end, all[2], all[3]);
  }
}
