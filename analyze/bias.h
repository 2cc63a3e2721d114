/* Structural bias (docs/SCIENCE.md, "Structural bias"): where along the prompt
 * a score's selection falls. The prompt is cut into B equal buckets of relative
 * position p/s; for a selection we count the share of its positions in each
 * bucket, and for a score the mean normalised score score_p / mean(score) of
 * each bucket's positions. Early buckets piling up weight is the bias a long
 * perturbation window causes. */
#ifndef OBC_BIAS_H
#define OBC_BIAS_H

#include <stddef.h>

/* The bucket of position p among n positions: floor(p * buckets / n), so
 * bucket b holds the positions with b/B <= p/n < (b+1)/B. */
size_t bias_bucket_of(size_t p, size_t n, size_t buckets);

/* share (buckets): share[b] = fraction of the k selected positions (k) in
 * bucket b; the shares sum to 1 (all 0 when k == 0). */
void bias_selection_shares(const size_t *selected, size_t k, size_t n, size_t buckets,
                           double *share);

/* mean_norm (buckets): mean over bucket b's positions of
 * scores[p] / mean_p(scores); 0 for an empty bucket, and all 0 when the mean
 * score is 0 (nothing to normalise by). scores: (n). */
void bias_mean_norm_scores(const double *scores, size_t n, size_t buckets, double *mean_norm);

#endif
