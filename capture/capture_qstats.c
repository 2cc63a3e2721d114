/* Pre-RoPE query statistics of every prompt row (capture/capture_qstats.h).
 * Per chunk, the RoPE angles of its rows are rounded to float once; per
 * query head (heads spread over threads) rows come in blocks of
 * QSTATS_BLOCK: each row is rotated back into a double block, whose column
 * sums go to sum and whose Gram matrix (dsyrk, upper triangle) goes to
 * outer. Each head's sums are added in one fixed order: results do not
 * depend on the thread count. */
#include "capture/capture_qstats.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"

enum { QSTATS_BLOCK = 64 };

int capture_qstats_init(CaptureQueryStats *s, size_t n_layers, size_t n_heads, size_t head_dim,
                        size_t n_prompt, size_t agnostic_rows, const double *inv_freq,
                        bool interleaved) {
  assert(agnostic_rows <= n_prompt && head_dim % 2 == 0);
  memset(s, 0, sizeof *s);
  s->n_layers = n_layers;
  s->n_heads = n_heads;
  s->head_dim = head_dim;
  s->n_prompt = n_prompt;
  s->agnostic_rows = agnostic_rows;
  s->interleaved = interleaved;
  size_t per_layer = TRACE_ROWS_VARIANTS * n_heads;
  s->inv_freq = obc_malloc(head_dim / 2 * sizeof *s->inv_freq, "RoPE frequencies");
  s->sum = obc_calloc(n_layers * per_layer * head_dim, sizeof *s->sum, "query sums");
  s->outer = obc_calloc(n_layers * per_layer * head_dim * head_dim, sizeof *s->outer,
                        "query outer-product sums");
  if (!s->inv_freq || !s->sum || !s->outer) {
    capture_qstats_free(s);
    return OBC_ENOMEM;
  }
  memcpy(s->inv_freq, inv_freq, head_dim / 2 * sizeof *s->inv_freq);
  return OBC_OK;
}

void capture_qstats_free(CaptureQueryStats *s) {
  free(s->inv_freq);
  free(s->sum);
  free(s->outer);
  memset(s, 0, sizeof *s);
}

const double *capture_qstats_sum(const CaptureQueryStats *s, size_t layer) {
  return s->sum + layer * TRACE_ROWS_VARIANTS * s->n_heads * s->head_dim;
}

const double *capture_qstats_outer(const CaptureQueryStats *s, size_t layer) {
  return s->outer + layer * TRACE_ROWS_VARIANTS * s->n_heads * s->head_dim * s->head_dim;
}

/* The running (all-rows) sums of (layer, head) become the agnostic ones. */
static void snapshot_agnostic(CaptureQueryStats *s, size_t layer, size_t h) {
  size_t d = s->head_dim, H = s->n_heads;
  double *sum = s->sum + layer * TRACE_ROWS_VARIANTS * H * d;
  double *outer = s->outer + layer * TRACE_ROWS_VARIANTS * H * d * d;
  memcpy(sum + h * d, sum + (H + h) * d, d * sizeof *sum);
  memcpy(outer + h * d * d, outer + (H + h) * d * d, d * d * sizeof *outer);
}

/* Rows [r0, r0 + nr) of the view for query head h into the all-rows sums.
 * cs: (rows, head_dim / 2, 2) the float cos and sin of each row's angles;
 * block: scratch (QSTATS_BLOCK, head_dim). */
static void add_block(CaptureQueryStats *s, const RuntimeLayerCapture *view, size_t h, size_t r0,
                      size_t nr, const float *cs, double *block) {
  size_t d = s->head_dim, half = d / 2, H = s->n_heads, layer = view->layer;
  for (size_t r = 0; r < nr; r++) {
    const float *q = view->q + (h * view->n_rows + r0 + r) * d;
    const float *t = cs + (r0 + r) * half * 2;
    double *pre = block + r * d;
    for (size_t j = 0; j < half; j++) { /* the inverse of cpu_rope's rotation */
      size_t a = s->interleaved ? 2 * j : j, b = s->interleaved ? 2 * j + 1 : j + half;
      double c = t[2 * j], sn = t[2 * j + 1], x0 = q[a], x1 = q[b];
      pre[a] = x0 * c + x1 * sn;
      pre[b] = x1 * c - x0 * sn;
    }
  }
  double *sum = s->sum + (layer * TRACE_ROWS_VARIANTS + TRACE_ROWS_ALL) * H * d + h * d;
  double *outer = s->outer + ((layer * TRACE_ROWS_VARIANTS + TRACE_ROWS_ALL) * H + h) * d * d;
  for (size_t r = 0; r < nr; r++)
    for (size_t c = 0; c < d; c++) sum[c] += block[r * d + c];
  cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)nr, 1.0, block, (int)d, 1.0,
              outer, (int)d);
}

void capture_qstats_count(CaptureQueryStats *s, size_t first, size_t end) {
  for (size_t i = first < TRACE_QSTATS_FIRST_ROW ? TRACE_QSTATS_FIRST_ROW : first; i < end; i++) {
    if (i == s->agnostic_rows) s->counts[TRACE_ROWS_AGNOSTIC] = s->counts[TRACE_ROWS_ALL];
    s->counts[TRACE_ROWS_ALL]++;
  }
}

int capture_qstats_add(CaptureQueryStats *s, const RuntimeLayerCapture *view) {
  size_t d = s->head_dim, half = d / 2, n = s->n_prompt, layer = view->layer;
  size_t first = 0, rows = 0; /* the view's rows [first, rows) that are summed */
  while (rows < view->n_rows && view->row_positions[rows] < n) rows++;
  while (first < rows && view->row_positions[first] < TRACE_QSTATS_FIRST_ROW) first++;
  for (size_t r = 0; r < rows; r++) /* every prompt row, in order, from the chunk's start */
    assert(view->row_positions[r] == view->pos0 + r);
  if (first == rows) return OBC_OK;
  size_t i_first = view->row_positions[first];
  if (layer == 0) capture_qstats_count(s, i_first, view->pos0 + rows);
  float *cs = obc_malloc(rows * half * 2 * sizeof *cs, "RoPE angles of the query rows");
  int n_threads = omp_get_max_threads();
  double *scratch =
      obc_malloc((size_t)n_threads * QSTATS_BLOCK * d * sizeof *scratch, "pre-RoPE query block");
  if (!cs || !scratch) {
    free(cs);
    free(scratch);
    return OBC_ENOMEM;
  }
  for (size_t r = first; r < rows; r++)
    for (size_t j = 0; j < half; j++) { /* as the runtime's float tables hold them */
      double angle = (double)view->row_positions[r] * s->inv_freq[j];
      cs[(r * half + j) * 2] = (float)cos(angle);
      cs[(r * half + j) * 2 + 1] = (float)sin(angle);
    }
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t h = 0; h < s->n_heads; h++) {
    double *block = scratch + (size_t)omp_get_thread_num() * QSTATS_BLOCK * d;
    for (size_t r0 = first; r0 < rows;) {
      /* blocks of QSTATS_BLOCK rows, cut where the agnostic rows end */
      size_t i0 = view->row_positions[r0], nr = rows - r0 < QSTATS_BLOCK ? rows - r0 : QSTATS_BLOCK;
      if (i0 < s->agnostic_rows && i0 + nr > s->agnostic_rows) nr = s->agnostic_rows - i0;
      if (i0 == s->agnostic_rows) snapshot_agnostic(s, layer, h);
      add_block(s, view, h, r0, nr, cs, block);
      r0 += nr;
    }
  }
  free(cs);
  free(scratch);
  return OBC_OK;
}

void capture_qstats_finish(CaptureQueryStats *s) {
  size_t d = s->head_dim;
  /* Agnostic rows ending at or before the first summed row leave the
   * variant empty; ending at the prompt's end, it is every row. */
  bool every_row = s->agnostic_rows >= s->n_prompt;
  for (size_t layer = 0; layer < s->n_layers; layer++)
    for (size_t h = 0; h < s->n_heads; h++) {
      if (every_row) snapshot_agnostic(s, layer, h);
      if (s->agnostic_rows <= TRACE_QSTATS_FIRST_ROW) {
        memset(s->sum + (layer * TRACE_ROWS_VARIANTS * s->n_heads + h) * d, 0, d * sizeof *s->sum);
        memset(s->outer + (layer * TRACE_ROWS_VARIANTS * s->n_heads + h) * d * d, 0,
               d * d * sizeof *s->outer);
      }
    }
  if (every_row) s->counts[TRACE_ROWS_AGNOSTIC] = s->counts[TRACE_ROWS_ALL];
  if (s->agnostic_rows <= TRACE_QSTATS_FIRST_ROW) s->counts[TRACE_ROWS_AGNOSTIC] = 0;
  for (size_t m = 0; m < s->n_layers * TRACE_ROWS_VARIANTS * s->n_heads; m++) {
    double *outer = s->outer + m * d * d;
    for (size_t a = 0; a < d; a++)
      for (size_t b = 0; b < a; b++) outer[a * d + b] = outer[b * d + a];
  }
}
