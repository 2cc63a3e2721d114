/* Average ranks and Spearman's rho; see stats.h. Ranks come from a stable
 * radix sort of the positions by an integer key that orders like the value
 * (NaN as -inf, -0 as +0), so ties stay grouped in position order and each
 * group receives the mean of the ranks it spans. A radix sort because the
 * analyser ranks every score at every window of every head: qsort with a
 * comparator call per comparison was most of its run time. */
#include "scores/stats.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"

/* An unsigned key with key(a) < key(b) exactly when a < b (IEEE order), and
 * equal keys exactly for equal values. */
static uint64_t rank_key(double v) {
  if (isnan(v)) v = -INFINITY;
  if (v == 0.0) v = 0.0; /* -0 and +0 are equal values */
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  return (bits >> 63) ? ~bits : bits | (1ULL << 63);
}

#define RADIX_BITS 11
#define RADIX_SIZE (1 << RADIX_BITS)
#define RADIX_PASSES 3 /* the top 33 bits of the key */
#define RADIX_LOW 31   /* key bits below the passes */

/* Stable LSD radix passes over key bits low .. low + 33 of pairs (n), 11 bits
 * a pass; tmp: (n). All digit histograms come from one read of the keys, and
 * a pass whose digit is the same for every key is skipped. Returns the array
 * holding the result (pairs or tmp). */
static StatsRankPair *radix_passes(StatsRankPair *pairs, StatsRankPair *tmp, size_t n, int low) {
  static _Thread_local uint32_t count[RADIX_PASSES][RADIX_SIZE];
  memset(count, 0, sizeof count);
  for (size_t i = 0; i < n; i++) {
    uint64_t key = pairs[i].key >> low;
    for (int pass = 0; pass < RADIX_PASSES; pass++)
      count[pass][(key >> (pass * RADIX_BITS)) & (RADIX_SIZE - 1)]++;
  }
  for (int pass = 0; pass < RADIX_PASSES; pass++) {
    int shift = low + pass * RADIX_BITS;
    uint32_t *c = count[pass];
    if (c[(pairs[0].key >> shift) & (RADIX_SIZE - 1)] == n) continue;
    uint32_t offset = 0;
    for (int d = 0; d < RADIX_SIZE; d++) {
      uint32_t here = c[d];
      c[d] = offset;
      offset += here;
    }
    for (size_t i = 0; i < n; i++) tmp[c[(pairs[i].key >> shift) & (RADIX_SIZE - 1)]++] = pairs[i];
    StatsRankPair *swap = pairs;
    pairs = tmp;
    tmp = swap;
  }
  return pairs;
}

/* Stable insertion sort of pairs (n) by the whole key. */
static void insertion_sort_pairs(StatsRankPair *pairs, size_t n) {
  for (size_t i = 1; i < n; i++) {
    StatsRankPair x = pairs[i];
    size_t j = i;
    while (j > 0 && pairs[j - 1].key > x.key) {
      pairs[j] = pairs[j - 1];
      j--;
    }
    pairs[j] = x;
  }
}

/* Stable sort of pairs (n) by key; tmp: (n). Radix passes over the top 33
 * key bits, then each run of equal top bits (values that agree to ~2^-21
 * relative: few, short runs) by its low 31 bits: insertion sort for short
 * runs, radix passes for long ones. The same order as radix passes over all
 * 64 bits, in about half of them. Returns the array holding the result. */
static StatsRankPair *radix_sort_pairs(StatsRankPair *pairs, StatsRankPair *tmp, size_t n) {
  StatsRankPair *sorted = radix_passes(pairs, tmp, n, RADIX_LOW);
  StatsRankPair *spare = sorted == pairs ? tmp : pairs;
  for (size_t start = 0; start < n;) {
    size_t end = start + 1;
    uint64_t top = sorted[start].key >> RADIX_LOW;
    while (end < n && sorted[end].key >> RADIX_LOW == top) end++;
    size_t len = end - start;
    if (len > 32) {
      StatsRankPair *run = radix_passes(sorted + start, spare + start, len, 0);
      if (run != sorted + start) memcpy(sorted + start, run, len * sizeof *run);
    } else if (len > 1) {
      insertion_sort_pairs(sorted + start, len);
    }
    start = end;
  }
  return sorted;
}

const StatsRankPair *stats_sort_values(const double *values, size_t n, StatsRankPair *scratch) {
  if (n == 0) return scratch;
  assert(n < UINT32_MAX); /* the radix counts */
  for (size_t i = 0; i < n; i++) scratch[i] = (StatsRankPair){rank_key(values[i]), i};
  return radix_sort_pairs(scratch, scratch + n, n);
}

void stats_ranks_from_sorted(const StatsRankPair *sorted, size_t n, double *ranks) {
  for (size_t start = 0; start < n;) {
    size_t end = start + 1;
    while (end < n && sorted[end].key == sorted[start].key) end++;
    double mean_rank = 0.5 * (double)(start + 1 + end); /* mean of start+1 .. end */
    for (size_t j = start; j < end; j++) ranks[sorted[j].index] = mean_rank;
    start = end;
  }
}

void stats_average_ranks(const double *values, size_t n, StatsRankPair *scratch, double *ranks) {
  stats_ranks_from_sorted(stats_sort_values(values, n, scratch), n, ranks);
}

/* The sums run in vector lanes (omp simd reductions), so their order
 * depends on the compiler. For ranks (multiples of 1/2, n < 2^17) every
 * partial sum is exact and the result is the same in any order. */
double stats_pearson(const double *x, const double *y, size_t n) {
  if (n < 2) return NAN;
  double mean_x = 0.0, mean_y = 0.0;
#pragma omp simd reduction(+ : mean_x, mean_y)
  for (size_t i = 0; i < n; i++) {
    mean_x += x[i];
    mean_y += y[i];
  }
  mean_x /= (double)n;
  mean_y /= (double)n;
  double sxy = 0.0, sxx = 0.0, syy = 0.0;
#pragma omp simd reduction(+ : sxy, sxx, syy)
  for (size_t i = 0; i < n; i++) {
    double dx = x[i] - mean_x, dy = y[i] - mean_y;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx <= 0.0 || syy <= 0.0) return NAN;
  return sxy / sqrt(sxx * syy);
}

int stats_spearman(const double *x, const double *y, size_t n, double *rho) {
  StatsRankPair *scratch = obc_malloc(2 * n * sizeof *scratch, "spearman sort");
  double *ranks = obc_malloc(2 * n * sizeof *ranks, "spearman ranks");
  if (!scratch || !ranks) {
    free(scratch);
    free(ranks);
    return OBC_ENOMEM;
  }
  stats_average_ranks(x, n, scratch, ranks);
  stats_average_ranks(y, n, scratch, ranks + n);
  *rho = stats_pearson(ranks, ranks + n, n);
  free(scratch);
  free(ranks);
  return OBC_OK;
}
