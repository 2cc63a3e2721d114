/* The statistics of `obcache eval` (docs/SCIENCE.md, "Task accuracy"):
 * RULER's two scoring functions, the Wilson score interval of an accuracy,
 * the exact McNemar test and a paired bootstrap interval for two methods
 * scored on the same samples, and the AUC with which a per-sample number
 * (recall against the oracle) separates correct answers from wrong ones.
 * Pure functions of their inputs; the bootstrap draws from a fixed seed. */
#ifndef OBC_EVAL_STATS_H
#define OBC_EVAL_STATS_H

#include <stddef.h>
#include <stdint.h>

/* RULER's string_match_all for one prediction: the share of refs that occur
 * in pred, ignoring ASCII case (0..1; 0 when n_refs is 0). */
double eval_match_all(const char *pred, const char *const *refs, size_t n_refs);
/* RULER's string_match_part for one prediction: 1 when any ref occurs in
 * pred, ignoring ASCII case, else 0. */
double eval_match_part(const char *pred, const char *const *refs, size_t n_refs);

/* Wilson score interval of k successes in n trials at z (1.959963984540054
 * for 95%): *low <= k/n <= *high, both in [0, 1]; n = 0 gives [0, 1]. */
void eval_wilson(size_t k, size_t n, double z, double *low, double *high);

/* Exact two-sided McNemar test on the discordant pairs: b samples right
 * only under the first method, c only under the second. The binomial
 * probability min(1, 2 P(X <= min(b, c))), X ~ Bin(b + c, 1/2); 1 when
 * b + c = 0. */
double eval_mcnemar_exact(size_t b, size_t c);

/* Paired bootstrap percentile interval of mean(y - x) over n paired values:
 * `resamples` resamples of the n indices drawn with replacement from seed,
 * the (1 - level)/2 and (1 + level)/2 quantiles of the resampled means
 * (linear interpolation between order statistics). n = 0 gives NaN. */
void eval_paired_bootstrap(const double *x, const double *y, size_t n, size_t resamples,
                           double level, uint64_t seed, double *low, double *high);

/* Area under the ROC curve of value as a predictor of label (1 = positive):
 * P(value of a positive > value of a negative) + P(equal)/2 over all pairs
 * (the Mann-Whitney statistic); NaN when either class is empty. */
double eval_auc(const double *value, const unsigned char *label, size_t n);

#endif
