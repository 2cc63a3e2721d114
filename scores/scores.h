/* Approximate scores and exact window errors (docs/SCIENCE.md, "Approximate
 * scores" and "Exact errors over the window") for one (layer, KV head), for a
 * list of perturbation windows in one pass.
 *
 * The window sweep walks the captured prompt rows from the last one backwards,
 * accumulating per-row contributions, and snapshots every quantity when the
 * window reaches each requested W: all windows cost what the largest costs. */
#ifndef OBC_SCORES_H
#define OBC_SCORES_H

#include <stddef.h>

#include "oracle/oracle.h"

/* Every per-token quantity the analyser ranks, in report order. The names
 * (score_quantity_name) are the dataset names of --scores-out. */
typedef enum {
  OBC_Q_ATTN = 0,     /* sum_i A_ip                        (H2O / TOVA) */
  OBC_Q_ATTN2,        /* sum_i A_ip^2                      (paper pseudo-code) */
  OBC_Q_ATTN_VL1,     /* (sum_i A_ip) * ||v_p||_1          (VATP's term, unpooled) */
  OBC_Q_ATTN_MAXPOOL, /* attn, then 1-D max pooling over positions */
  OBC_Q_OBC_V,        /* OBCache value */
  OBC_Q_OBC_K,        /* OBCache key */
  OBC_Q_OBC_VK,       /* OBCache joint */
  OBC_Q_EXACT_V,      /* exact errors of oracle.h, summed over the group */
  OBC_Q_EXACT_K,
  OBC_Q_EXACT_VK,
  OBC_Q_REMOVE,
  OBC_Q_COUNT
} ScoreQuantity;

/* How per-query-head scores of a GQA group are combined. Exact errors are
 * always summed (docs/SCIENCE.md, "Notation: one layer, one KV head"). */
typedef enum { OBC_GQA_SUM = 0, OBC_GQA_MEAN, OBC_GQA_MAX } ScoreGqa;

typedef struct {
  OraclePrecision precision; /* default OBC_PRECISION_FLOAT */
  ScoreGqa aggregation;
  size_t maxpool_kernel; /* odd pooling width, default 7 */
} ScoreOptions;

void score_options_default(ScoreOptions *options);
const char *score_quantity_name(ScoreQuantity q); /* "attn", ..., "remove" */
int score_quantity_from_name(const char *name);   /* -1 when unknown */
/* 1 for the approximate scores, 0 for exact errors. */
int score_quantity_is_score(ScoreQuantity q);

/* For each window windows[w] (1 <= W <= captured contiguous prompt rows,
 * any order), every quantity for every prompt position:
 * out[(w * OBC_Q_COUNT + q) * n_prompt + p]. Thread-safe; parallelises over
 * the group's heads and positions with OpenMP when not already in a parallel
 * region. */
int score_window_sweep(const OracleHead *head, const size_t *windows, size_t n_windows,
                       const ScoreOptions *options, double *out);

/* 1-D max pooling of scores (n) with an odd kernel, edges clamped. */
void score_max_pool(const double *in, size_t n, size_t kernel, double *out);

#endif
