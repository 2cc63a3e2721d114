/* The statistics of `obcache eval` (eval/stats.h): RULER's string matches,
 * the Wilson interval, the exact McNemar test (binomial tail from its
 * largest term down, so b + c in the thousands neither overflows nor loses
 * the tail), the paired bootstrap (indices drawn with niah_random_below from
 * one splitmix64 stream), its stratified form for RULER's score, the
 * sign-flip test (enumerated with a Gray code, or drawn), the McNemar test's
 * power and minimum detectable difference, Holm's adjustment and the
 * Mann-Whitney AUC (midranks of the sorted values, O(n log n)). */
#include "eval/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prompts/niah_random.h"

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

/* ---- McNemar power ---- */

/* P(X <= k) for X ~ Bin(m, pi), k < m: the terms from i = 0 up, each from
 * the last in log space, log C(m, i + 1) / C(m, i) = log_j[m - i] -
 * log_j[i + 1] (log_j[j] = log j). */
static double binomial_cdf(size_t m, size_t k, double pi, const double *log_j) {
  if (pi <= 0.0) return 1.0;
  if (pi >= 1.0) return 0.0;
  double log_term = (double)m * log1p(-pi), log_ratio = log(pi) - log1p(-pi), sum = 0.0;
  for (size_t i = 0; i <= k; i++) {
    sum += exp(log_term);
    log_term += log_j[m - i] - log_j[i + 1] + log_ratio;
  }
  return sum;
}

/* Weights below this of the discordant count m are left out: all of them
 * together hold less than n times it. */
#define POWER_NEGLIGIBLE 1e-20

double eval_mcnemar_power(size_t n, double psi, double delta, double alpha) {
  if (!(psi > 0.0) || n == 0) return 0.0;
  psi = fmin(psi, 1.0);
  double *log_j = malloc((n + 2) * sizeof *log_j);
  if (!log_j) return NAN;
  log_j[0] = 0.0;
  for (size_t j = 1; j <= n + 1; j++) log_j[j] = log((double)j);
  double pi = fmin(1.0, fmax(0.0, (1.0 + delta / psi) / 2.0)), power = 0.0, nn = (double)n;
  long k = -1; /* k(m): nondecreasing in m, so the search resumes from k(m - 1) */
  for (size_t m = 1; m <= n; m++) {
    while ((size_t)(k + 1) * 2 < m &&
           eval_mcnemar_exact((size_t)(k + 1), m - (size_t)(k + 1)) <= alpha)
      k++;
    if (k < 0) continue;
    double mm = (double)m;
    double weight = psi >= 1.0 ? (m == n)
                               : exp(lgamma(nn + 1) - lgamma(mm + 1) - lgamma(nn - mm + 1) +
                                     mm * log(psi) + (nn - mm) * log1p(-psi));
    if (weight < POWER_NEGLIGIBLE) continue;
    /* c <= k or c >= m - k for c ~ Bin(m, pi): the second by symmetry */
    double reject =
        binomial_cdf(m, (size_t)k, pi, log_j) + binomial_cdf(m, (size_t)k, 1.0 - pi, log_j);
    power += weight * fmin(1.0, reject);
  }
  free(log_j);
  return fmin(1.0, power);
}

double eval_mcnemar_mde(size_t n, double psi, double alpha, double power) {
  if (!(psi > 0.0) || eval_mcnemar_power(n, psi, psi, alpha) < power) return NAN;
  double lo = 0.0, hi = psi;
  while (hi - lo > 1e-9) {
    double mid = (lo + hi) / 2.0;
    if (eval_mcnemar_power(n, psi, mid, alpha) >= power)
      hi = mid;
    else
      lo = mid;
  }
  return hi;
}

double eval_mcnemar_samples_normal(double psi, double delta) {
  static const double z_alpha = 1.959963984540054, z_power = 0.8416212335729143;
  double d = fabs(delta);
  if (!(d > 0.0) || d > psi || psi > 1.0) return NAN;
  double root = z_alpha * sqrt(psi) + z_power * sqrt(psi - d * d);
  return root * root / (d * d);
}

typedef struct {
  double p;
  size_t index;
} RankedP;

static int compare_ranked(const void *a, const void *b) {
  const RankedP *x = a, *y = b;
  if (x->p != y->p) return x->p < y->p ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

void eval_holm(double *p, size_t n) {
  RankedP *r = malloc(n * sizeof *r);
  if (!r) { /* out of memory: Bonferroni, never smaller than Holm's */
    for (size_t i = 0; i < n; i++) p[i] = fmin(1.0, p[i] * (double)n);
    return;
  }
  for (size_t i = 0; i < n; i++) r[i] = (RankedP){p[i], i};
  qsort(r, n, sizeof *r, compare_ranked);
  double running = 0.0;
  for (size_t j = 0; j < n; j++) {
    running = fmax(running, fmin(1.0, (double)(n - j) * r[j].p));
    p[r[j].index] = running;
  }
  free(r);
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

/* ---- RULER's score: stratified mean and bootstrap ---- */

double eval_stratified_mean(const double *x, const size_t *stratum, size_t n, size_t n_strata) {
  if (n == 0 || n_strata == 0) return NAN;
  double *sum = calloc(n_strata, sizeof *sum);     /* (n_strata) */
  size_t *count = calloc(n_strata, sizeof *count); /* (n_strata) */
  double mean = NAN;
  if (sum && count) {
    for (size_t i = 0; i < n; i++) {
      sum[stratum[i]] += x[i];
      count[stratum[i]]++;
    }
    double total = 0.0;
    size_t used = 0;
    for (size_t k = 0; k < n_strata; k++)
      if (count[k]) {
        total += sum[k] / (double)count[k];
        used++;
      }
    mean = total / (double)used;
  }
  free(sum);
  free(count);
  return mean;
}

void eval_stratified_bootstrap(const double *x, const size_t *stratum, size_t n, size_t n_strata,
                               size_t resamples, double level, uint64_t seed, double *low,
                               double *high) {
  *low = *high = NAN;
  if (n == 0 || resamples == 0 || n_strata == 0) return;
  size_t *start = calloc(n_strata + 1, sizeof *start); /* (n_strata + 1) offsets into members */
  size_t *members = malloc(n * sizeof *members);       /* (n) indices grouped by stratum */
  size_t *fill = calloc(n_strata, sizeof *fill);       /* (n_strata) */
  double *means = malloc(resamples * sizeof *means);   /* (resamples) */
  if (start && members && fill && means) {
    for (size_t i = 0; i < n; i++) start[stratum[i] + 1]++;
    for (size_t k = 0; k < n_strata; k++) start[k + 1] += start[k];
    for (size_t i = 0; i < n; i++) members[start[stratum[i]] + fill[stratum[i]]++] = i;
    size_t used = 0;
    for (size_t k = 0; k < n_strata; k++) used += start[k + 1] > start[k];
    NiahRandom random;
    niah_random_seed(&random, seed);
    for (size_t r = 0; r < resamples; r++) {
      double total = 0.0;
      for (size_t k = 0; k < n_strata; k++) {
        size_t count = start[k + 1] - start[k];
        if (!count) continue;
        double sum = 0.0;
        for (size_t i = 0; i < count; i++)
          sum += x[members[start[k] + niah_random_below(&random, count)]];
        total += sum / (double)count;
      }
      means[r] = total / (double)used;
    }
    qsort(means, resamples, sizeof *means, compare_doubles);
    *low = sorted_quantile(means, resamples, (1 - level) / 2);
    *high = sorted_quantile(means, resamples, (1 + level) / 2);
  }
  free(start);
  free(members);
  free(fill);
  free(means);
}

/* ---- sign-flip test ---- */

double eval_sign_flip_p(const double *d, size_t n, size_t resamples, uint64_t seed) {
  double *v = malloc((n + 1) * sizeof *v); /* (m) the non-zero differences */
  if (!v) return NAN;
  size_t m = 0;
  double observed = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; i++)
    if (d[i] != 0.0) {
      v[m++] = d[i];
      observed += d[i];
      scale += fabs(d[i]);
    }
  double p = 1.0;
  double reach = fabs(observed) - 1e-9 * scale; /* |sum| >= reach counts */
  if (m > 0 && m <= EVAL_SIGN_FLIP_EXACT_MAX) {
    /* Every assignment in Gray-code order: step g flips the sign of the
     * value at the lowest set bit of g, so the sum updates by 2 v. */
    double sum = observed;
    size_t hits = fabs(sum) >= reach, total = (size_t)1 << m;
    unsigned char *negated = calloc(m, 1);
    if (!negated) {
      free(v);
      return NAN;
    }
    for (size_t g = 1; g < total; g++) {
      size_t bit = 0;
      while (!((g >> bit) & 1)) bit++;
      sum += negated[bit] ? 2 * v[bit] : -2 * v[bit];
      negated[bit] ^= 1;
      hits += fabs(sum) >= reach;
    }
    free(negated);
    p = (double)hits / (double)total;
  } else if (m > 0) {
    NiahRandom random;
    niah_random_seed(&random, seed);
    size_t hits = 0;
    for (size_t r = 0; r < resamples; r++) {
      double sum = 0.0;
      for (size_t i = 0; i < m; i++) sum += (niah_random_next(&random) >> 63) ? -v[i] : v[i];
      hits += fabs(sum) >= reach;
    }
    p = (double)(1 + hits) / (double)(1 + resamples);
  }
  free(v);
  return p;
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
