/* Statistics of the pre-RoPE queries of every prompt row, accumulated during
 * the capture's prefill: kvpress's ExpectedAttentionPress scores a key by
 * the attention a Gaussian model of future queries would give it, built from
 * the mean and covariance of the prompt's pre-RoPE queries, but a trace keeps
 * only the last R rows. Per layer and query head the accumulator adds, over
 * the prompt rows i >= TRACE_QSTATS_FIRST_ROW (kvpress's n_sink),
 *   sum_i q_i  and  sum_i q_i q_i^T
 * of the pre-RoPE query q_i, in two variants: the rows before the question
 * (query-agnostic) and all prompt rows. The runtime shows post-RoPE queries;
 * RoPE is a rotation per position, so q_i is recovered by rotating back with
 * the same angles (position i x inv_freq, rounded to float as the runtime's
 * tables are) in the model's head-dimension layout. That works the same for
 * every backend that shows its query rows. */
#ifndef OBC_CAPTURE_QSTATS_H
#define OBC_CAPTURE_QSTATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"
#include "traces/trace.h"

typedef struct {
  size_t n_layers, n_heads, head_dim;
  size_t n_prompt;      /* rows summed over: [TRACE_QSTATS_FIRST_ROW, n_prompt) */
  size_t agnostic_rows; /* rows [.., agnostic_rows) form the agnostic variant */
  bool interleaved;     /* RoPE pairs (2j, 2j+1), else (j, j + head_dim / 2) */
  double *inv_freq;     /* (head_dim / 2) the runtime's RoPE frequencies */
  double *sum;          /* (n_layers, TRACE_ROWS_VARIANTS, n_heads, head_dim) */
  double *outer;        /* (n_layers, TRACE_ROWS_VARIANTS, n_heads, head_dim, head_dim) */
  int64_t counts[TRACE_ROWS_VARIANTS]; /* rows of layer 0 added to each variant */
} CaptureQueryStats;

int capture_qstats_init(CaptureQueryStats *stats, size_t n_layers, size_t n_heads, size_t head_dim,
                        size_t n_prompt, size_t agnostic_rows, const double *inv_freq,
                        bool interleaved);
void capture_qstats_free(CaptureQueryStats *stats);
/* Adds the prompt rows of one layer's capture view (every prompt row of the
 * chunk must be there, in position order, and the chunks must come in
 * order). */
int capture_qstats_add(CaptureQueryStats *stats, const RuntimeLayerCapture *view);
/* Counts rows [first, end) of layer 0 that are summed (capture_qstats_add
 * does it for its rows; sums made on a device need it once for every row). */
void capture_qstats_count(CaptureQueryStats *stats, size_t first, size_t end);
/* After the last prompt row: completes the agnostic variant when the prompt
 * has no question, and mirrors each q q^T sum (accumulated in its upper
 * triangle) into an exactly symmetric matrix. */
void capture_qstats_finish(CaptureQueryStats *stats);
/* One layer's sums in trace_write_query_stats's layout. */
const double *capture_qstats_sum(const CaptureQueryStats *stats, size_t layer);
const double *capture_qstats_outer(const CaptureQueryStats *stats, size_t layer);

#endif
