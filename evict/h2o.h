/* H2O's score from a trace's column sums of every prompt row
 * (traces/trace.h, trace_read_column_sums), in the two forms the field
 * runs, and the OBCache pairings of each. For KV head g and candidate
 * position p, with S_hp = sum_i A_ip over the rows that could attend p
 * (or the sum of one OBCache term over them: obc_v, obc_k or obc_vk in
 * place of the attention, everything else unchanged) and count_p the
 * number of those rows (n - p for n rows):
 *   accumulated (the H2O paper, arXiv 2306.14048, and the OBCache paper's
 *     H2O and H2O+OBC): score_gp = sum over the query heads h of g of S_hp;
 *   observed (kvpress ObservedAttentionPress): score_gp = mean over the
 *     query heads h of g of S_hp / count_p.
 * The query-agnostic protocol scores the context alone (the rows before
 * the question); the query-aware one the rows up to the question's end. */
#ifndef OBC_EVICT_H2O_H
#define OBC_EVICT_H2O_H

#include <stddef.h>

#include "traces/trace.h"

/* Which per-row quantity H2O accumulates. */
typedef enum { H2O_ATTN = 0, H2O_OBC_V, H2O_OBC_K, H2O_OBC_VK } H2oTerm;

/* How the sums become one score per KV head. */
typedef enum {
  H2O_ACCUMULATED = 0, /* the sum over the rows, summed over the group (H2O paper) */
  H2O_OBSERVED         /* each sum / its rows, mean over the group (kvpress) */
} H2oForm;

/* out (n_kv_heads, n_candidates): the scores of positions [0, n_candidates)
 * of one layer. n_candidates must not exceed the variant's rows
 * (agnostic_rows, or n_prompt): a position no row saw has no score
 * (OBC_EINVAL). OBC_ENOTFOUND when the trace has no column sums. */
int h2o_scores(TraceReader *reader, size_t layer, size_t n_candidates, TraceSumRows rows,
               H2oTerm term, H2oForm form, double *out /* (n_kv_heads, n_candidates) */);
/* Same, from the sums of `rows` less those of `less_rows` further rows that
 * every candidate was seen by: less (n_heads, n_candidates) their sums per
 * query head (their counts are less_rows). The query-aware protocol's rows
 * up to the question's end are every prompt row less the template tail's. */
int h2o_scores_less(TraceReader *reader, size_t layer, size_t n_candidates, TraceSumRows rows,
                    H2oTerm term, H2oForm form, const double *less, size_t less_rows,
                    double *out /* (n_kv_heads, n_candidates) */);

#endif
