/* H2O's score as kvpress's ObservedAttentionPress computes it, and the
 * OBCache pairing H2O+OBC, from a trace's column sums of every prompt row
 * (traces/trace.h, trace_read_column_sums). For KV head g and candidate
 * position p,
 *   score_gp = mean over the query heads h of g of S_hp / count_p,
 * where S_hp is sum_i A_ip over the rows that could attend p (H2O), or the
 * sum of one OBCache term over them (H2O+OBC: the attention inside H2O
 * replaced by obc_v, obc_k or obc_vk, everything else unchanged), and
 * count_p is the number of those rows (n - p for n rows). The query-agnostic
 * protocol scores the context alone (the rows before the question); the
 * query-aware one every prompt row. */
#ifndef OBC_EVICT_H2O_H
#define OBC_EVICT_H2O_H

#include <stddef.h>

#include "traces/trace.h"

/* Which per-row quantity H2O accumulates. */
typedef enum { H2O_ATTN = 0, H2O_OBC_V, H2O_OBC_K, H2O_OBC_VK } H2oTerm;

/* out (n_kv_heads, n_candidates): the scores of positions [0, n_candidates)
 * of one layer. n_candidates must not exceed the variant's rows
 * (agnostic_rows, or n_prompt): a position no row saw has no score
 * (OBC_EINVAL). OBC_ENOTFOUND when the trace has no column sums. */
int h2o_scores(TraceReader *reader, size_t layer, size_t n_candidates, TraceSumRows rows,
               H2oTerm term, double *out /* (n_kv_heads, n_candidates) */);

#endif
