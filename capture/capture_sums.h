/* Column sums of every prompt row's attention, accumulated during the
 * capture's prefill: H2O (the H2O paper's accumulated attention and
 * kvpress's ObservedAttentionPress) and the OBCache authors' H2O+OBC score
 * a token by what every query row gave it, but a trace keeps only the last
 * R rows. For each layer, query head h and prompt
 * position p the accumulator adds, over the prompt rows i >= p,
 *   A_ip,  A_ip^2 vv_p (obc_v),  (A_ip z_ip)^2 dd_ip (obc_k),
 *   A_ip^2 ||v_p + z_ip (v_p - o_i)||^2 (obc_vk)
 * (vv = ||v_p||^2, dd = ||v_p - o_i||^2; docs/SCIENCE.md), in two variants:
 * the rows before the question (query-agnostic) and all prompt rows. Rows
 * arrive in position order, so the agnostic variant is a copy of the running
 * sums taken when the first question row arrives. */
#ifndef OBC_CAPTURE_SUMS_H
#define OBC_CAPTURE_SUMS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"
#include "traces/trace.h"

typedef struct {
  size_t n_layers, n_heads, n_kv_heads, head_dim;
  size_t n_prompt;      /* rows and positions summed over */
  size_t agnostic_rows; /* rows [0, agnostic_rows) form the agnostic variant */
  float scale;          /* logit scale, as the runtime's attention uses it */
  double *attn;         /* (n_layers, TRACE_ROWS_VARIANTS, n_heads, n_prompt) */
  double *obc;          /* (n_layers, TRACE_ROWS_VARIANTS, TRACE_OBC_TERMS, n_heads, n_prompt) */
  double *vv;           /* (n_layers, n_kv_heads, n_prompt) ||v_p||^2 */
  int64_t *counts;      /* (TRACE_ROWS_VARIANTS, n_prompt) rows of layer 0 that saw p */
} CaptureSums;

int capture_sums_init(CaptureSums *sums, size_t n_layers, size_t n_heads, size_t n_kv_heads,
                      size_t head_dim, size_t n_prompt, size_t agnostic_rows, float scale);
void capture_sums_free(CaptureSums *sums);
/* Adds the prompt rows of one layer's capture view (every requested row of
 * the chunk must be there, in position order, and the chunks must come in
 * order); K and V of positions before the chunk are read from the cache. */
int capture_sums_add(CaptureSums *sums, const RuntimeLayerCapture *view, const RuntimeCache *cache);
/* Counts rows [first, end) of layer 0 (capture_sums_add does it for its
 * rows; sums made elsewhere, on a device, need it once for every row). */
void capture_sums_count(CaptureSums *sums, size_t first, size_t end);
/* After the last prompt row: completes the agnostic variant when the prompt
 * has no question (it is then every row). counts holds, per variant and
 * position, the number of rows that saw it. */
void capture_sums_finish(CaptureSums *sums);
/* The sums of one layer, in trace_write_column_sums's layout. */
const double *capture_sums_attn(const CaptureSums *sums, size_t layer);
const double *capture_sums_obc(const CaptureSums *sums, size_t layer);

#endif
