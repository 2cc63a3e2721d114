/* The decode_attn score of one (layer, KV head): the attention mass each
 * prompt token receives from the captured decode queries of a range of
 * steps, summed over those steps and the group's query heads
 * (docs/SCIENCE.md, "The oracle"). The cheap, answer-aware baseline beside
 * the oracle: it needs the decode queries too, but no values. */
#ifndef OBC_ORACLE_DECODE_ATTENTION_H
#define OBC_ORACLE_DECODE_ATTENTION_H

#include <stddef.h>

#include "oracle/oracle.h"

/* out (n_prompt)[p] = sum_{j in group} sum_{steps} exp(z_ip - lse_i) over the
 * decode rows of steps first_step..first_step+n_steps-1 (1-based). OBC_EINVAL
 * when those rows are not captured. */
int oracle_decode_attention(const OracleHead *head, size_t first_step, size_t n_steps,
                            OraclePrecision precision, double *out);

#endif
