/* The statistics of `obcache eval` (docs/SCIENCE.md, "Task accuracy"):
 * RULER's two scoring functions, the Wilson score interval of an accuracy,
 * the exact McNemar test and a paired bootstrap interval for two methods
 * scored on the same samples, a (task-stratified) bootstrap interval of
 * RULER's score, an exact or Monte Carlo sign-flip test on paired score
 * differences, and the AUC with which a per-sample number
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

/* Power of the exact two-sided McNemar test (eval_mcnemar_exact) at level
 * alpha for n pairs whose discordance is psi (the probability that exactly
 * one method is right) and whose accuracy difference is delta (P(only the
 * second right) - P(only the first right)), 0 <= |delta| <= psi <= 1.
 * Unconditional over the discordant count m ~ Bin(n, psi); given m, the
 * second method's share of the discordant pairs is Bin(m, (1 + delta /
 * psi) / 2) and the test rejects when the smaller count is at most k(m),
 * the largest k with eval_mcnemar_exact(k, m - k) <= alpha. 0 when psi is 0
 * (no discordant pair ever rejects). */
double eval_mcnemar_power(size_t n, double psi, double delta, double alpha);

/* The minimum detectable difference of that test: the smallest delta in
 * (0, psi] whose power at (n, psi) reaches power (bisection to 1e-9; the
 * power grows with delta). NaN when psi is 0 or even delta = psi, every
 * discordant pair one way, falls short. */
double eval_mcnemar_mde(size_t n, double psi, double alpha, double power);

/* Pairs that the McNemar test needs to detect delta at discordance psi with
 * 80% power at alpha 0.05, by Connor's normal approximation (Biometrics
 * 1987): ((z_0.975 sqrt(psi) + z_0.8 sqrt(psi - delta^2)) / delta)^2, not
 * rounded. NaN unless 0 < |delta| <= psi <= 1. */
double eval_mcnemar_samples_normal(double psi, double delta);

/* Holm's step-down adjustment of n p-values, in place: the i-th smallest
 * becomes max over j <= i of min(1, (n - j) p_(j)) (0-based ranks; ties
 * keep their input order). */
void eval_holm(double *p, size_t n);

/* Paired bootstrap percentile interval of mean(y - x) over n paired values:
 * `resamples` resamples of the n indices drawn with replacement from seed,
 * the (1 - level)/2 and (1 + level)/2 quantiles of the resampled means
 * (linear interpolation between order statistics). n = 0 gives NaN. */
void eval_paired_bootstrap(const double *x, const double *y, size_t n, size_t resamples,
                           double level, uint64_t seed, double *low, double *high);

/* RULER's average of n per-answer values x in strata (tasks): the mean over
 * the strata that hold a value of each stratum's mean (one stratum: the
 * plain mean). stratum[i] < n_strata; NaN when n is 0. */
double eval_stratified_mean(const double *x, const size_t *stratum, size_t n, size_t n_strata);

/* Percentile bootstrap interval of eval_stratified_mean: every resample
 * draws, stratum by stratum in order 0 .. n_strata - 1, as many indices as
 * the stratum holds, each niah_random_below(count) among the stratum's
 * values in input order, from one stream seeded once with seed; the
 * statistic is the mean of the resampled stratum means (each the
 * left-to-right sum divided by the count); the interval is the (1 - level)/2
 * and (1 + level)/2 type 7 quantiles. With one stratum the draws are those
 * of eval_paired_bootstrap. n = 0 gives NaN. */
void eval_stratified_bootstrap(const double *x, const size_t *stratum, size_t n, size_t n_strata,
                               size_t resamples, double level, uint64_t seed, double *low,
                               double *high);

/* Two-sided sign-flip (paired permutation) test of n paired differences d:
 * under the null every non-zero difference is as likely negated, and p is
 * the share of sign assignments whose |sum| reaches the observed |sum|
 * (within 1e-9 of sum |d|, so equal sums reached in another order count).
 * Exact enumeration of the 2^m assignments when m, the count of non-zero
 * differences, is at most EVAL_SIGN_FLIP_EXACT_MAX; otherwise Monte Carlo,
 * (1 + hits) / (1 + resamples), where each resample takes one
 * niah_random_next draw per non-zero difference, in order, from one stream
 * seeded once with seed, and negates it when the draw's top bit is set.
 * 1 when m = 0. For differences in {-1, 0, 1} the exact p is the exact
 * McNemar p. */
#define EVAL_SIGN_FLIP_EXACT_MAX 16
double eval_sign_flip_p(const double *d, size_t n, size_t resamples, uint64_t seed);

/* Area under the ROC curve of value as a predictor of label (1 = positive):
 * P(value of a positive > value of a negative) + P(equal)/2 over all pairs
 * (the Mann-Whitney statistic); NaN when either class is empty. */
double eval_auc(const double *value, const unsigned char *label, size_t n);

#endif
