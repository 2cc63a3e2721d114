/* The statistics of `obcache eval` (eval/stats.h): RULER's string matches,
 * the Wilson interval, the exact McNemar test (binomial tail from its
 * largest term down, so b + c in the thousands neither overflows nor loses
 * the tail), the paired bootstrap (indices drawn with niah_random_below from
 * one splitmix64 stream) and the Mann-Whitney AUC (midranks of the sorted
 * values, O(n log n)). */
#include "eval/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "capture/niah_random.h"

/* ---- RULER's string matches ---- */

static unsigned char ascii_lower(unsigned char c) {
  return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* 1 when needle occurs in haystack, ignoring ASCII case (Python's
 * needle.lower() in haystack.lower() for ASCII text; "" occurs everywhere). */
static int contains_ignoring_case(const char *haystack, const char *needle) {
  size_t n = strlen(needle), h = strlen(haystack);
  if (n == 0) return 1;
  for (size_t start = 0; start + n <= h; start++) {
    size_t i = 0;
    while (i < n &&
           ascii_lower((unsigned char)haystack[start + i]) == ascii_lower((unsigned char)needle[i]))
      i++;
    if (i == n) return 1;
  }
  return 0;
}

double eval_match_all(const char *pred, const char *const *refs, size_t n_refs) {
  if (n_refs == 0) return 0.0;
  size_t found = 0;
  for (size_t r = 0; r < n_refs; r++) found += (size_t)contains_ignoring_case(pred, refs[r]);
  return (double)found / (double)n_refs;
}

double eval_match_part(const char *pred, const char *const *refs, size_t n_refs) {
  for (size_t r = 0; r < n_refs; r++)
    if (contains_ignoring_case(pred, refs[r])) return 1.0;
  return 0.0;
}

/* ---- Wilson interval ---- */

void eval_wilson(size_t k, size_t n, double z, double *low, double *high) {
  if (n == 0 || k > n) {
    *low = 0.0;
    *high = 1.0;
    return;
  }
  /* p the observed share, z2n = z^2 / n; centre and half-width of the
   * interval {q : |p - q| <= z sqrt(q (1 - q) / n)}. */
  double nn = (double)n, p = (double)k / nn, z2n = z * z / nn;
  double centre = (p + z2n / 2) / (1 + z2n);
  double half = z / (1 + z2n) * sqrt(p * (1 - p) / nn + z2n / (4 * nn));
  *low = k == 0 ? 0.0 : fmax(0.0, fmin(p, centre - half));
  *high = k == n ? 1.0 : fmin(1.0, fmax(p, centre + half));
}

/* ---- exact McNemar ---- */

double eval_mcnemar_exact(size_t b, size_t c) {
  size_t n = b + c, m = b < c ? b : c;
  if (n == 0 || 2 * m >= n) return 1.0; /* b = c: the lower tail holds half or more */
  /* P(X <= m) for X ~ Bin(n, 1/2), m < n/2: the largest term C(n, m) / 2^n
   * in log space, then the terms below it by the ratio
   * C(n, i - 1) / C(n, i) = i / (n - i + 1) < 1 (the sum stops once they
   * underflow). */
  double nn = (double)n, mm = (double)m;
  double log_top = lgamma(nn + 1) - lgamma(mm + 1) - lgamma(nn - mm + 1) - nn * log(2.0);
  double term = 1.0, tail_over_top = 1.0; /* sum of term i / term m, i = m .. 0 */
  for (size_t i = m; i > 0 && term > 0; i--) {
    term *= (double)i / (double)(n - i + 1);
    tail_over_top += term;
  }
  double p = 2.0 * exp(log_top) * tail_over_top;
  return p < 1.0 ? p : 1.0;
}

/* ---- paired bootstrap ---- */

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile of sorted (n > 0) by linear interpolation between order
 * statistics at position q (n - 1) (Hyndman and Fan's type 7). */
static double sorted_quantile(const double *sorted, size_t n, double q) {
  double position = q * (double)(n - 1);
  size_t below = (size_t)floor(position);
  if (below + 1 >= n) return sorted[n - 1];
  double t = position - (double)below;
  return sorted[below] + t * (sorted[below + 1] - sorted[below]);
}

void eval_paired_bootstrap(const double *x, const double *y, size_t n, size_t resamples,
                           double level, uint64_t seed, double *low, double *high) {
  *low = *high = NAN;
  if (n == 0 || resamples == 0) return;
  double *difference = malloc(n * sizeof *difference); /* (n) y - x */
  double *means = malloc(resamples * sizeof *means);   /* (resamples) */
  if (difference && means) {
    for (size_t i = 0; i < n; i++) difference[i] = y[i] - x[i];
    /* Resample r takes the n indices niah_random_below(n), in order, from
     * the one stream seeded once with seed; its mean is the left-to-right
     * sum of the drawn differences divided by n. */
    NiahRandom random;
    niah_random_seed(&random, seed);
    for (size_t r = 0; r < resamples; r++) {
      double sum = 0.0;
      for (size_t i = 0; i < n; i++) sum += difference[niah_random_below(&random, n)];
      means[r] = sum / (double)n;
    }
    qsort(means, resamples, sizeof *means, compare_doubles);
    *low = sorted_quantile(means, resamples, (1 - level) / 2);
    *high = sorted_quantile(means, resamples, (1 + level) / 2);
  }
  free(difference);
  free(means);
}

/* ---- AUC ---- */

typedef struct {
  double value;
  unsigned char label;
} AucItem;

static int compare_items(const void *a, const void *b) {
  return compare_doubles(&((const AucItem *)a)->value, &((const AucItem *)b)->value);
}

double eval_auc(const double *value, const unsigned char *label, size_t n) {
  size_t positives = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(value[i])) return NAN;
    positives += label[i] != 0;
  }
  size_t negatives = n - positives;
  if (positives == 0 || negatives == 0) return NAN;
  AucItem *items = malloc(n * sizeof *items);
  if (!items) return NAN;
  for (size_t i = 0; i < n; i++) items[i] = (AucItem){.value = value[i], .label = label[i] != 0};
  qsort(items, n, sizeof *items, compare_items);
  /* Mann-Whitney U of the positives: the sum of their midranks (1-based,
   * ties share the mean rank of their run) minus positives (positives+1)/2. */
  double rank_sum = 0.0;
  for (size_t start = 0; start < n;) {
    size_t end = start;
    while (end < n && items[end].value == items[start].value) end++;
    double midrank = ((double)start + 1 + (double)end) / 2;
    for (size_t i = start; i < end; i++)
      if (items[i].label) rank_sum += midrank;
    start = end;
  }
  free(items);
  double np = (double)positives, u = rank_sum - np * (np + 1) / 2;
  return u / (np * (double)negatives);
}
