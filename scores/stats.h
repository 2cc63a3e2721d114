/* Rank statistics for comparing a score with the oracle: average ranks (tied
 * values share the mean of the ranks they span) and Spearman's rank
 * correlation, the Pearson correlation of those ranks. */
#ifndef OBC_STATS_H
#define OBC_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Scratch entry of the ranking sort: an order-preserving integer key of the
 * value and the value's index. */
typedef struct {
  uint64_t key;
  size_t index;
} StatsRankPair;

/* ranks (n): 1-based average ranks of values (n) in ascending order; equal
 * values share the mean of their ranks. NaN sorts below every number.
 * scratch: (2 n). A stable LSD radix sort on the key: O(n), no comparisons. */
void stats_average_ranks(const double *values, size_t n, StatsRankPair *scratch, double *ranks);

/* Sorts values (n) ascending (NaN as -inf, -0 as +0, equal values in index
 * order) and returns the sorted pairs, which lie in scratch (2 n) at
 * scratch or scratch + n. The order serves both the ranks and, read from
 * the end, the top-k selection (select_rank_top_sorted). */
const StatsRankPair *stats_sort_values(const double *values, size_t n, StatsRankPair *scratch);

/* ranks (n): average ranks from the output of stats_sort_values. */
void stats_ranks_from_sorted(const StatsRankPair *sorted, size_t n, double *ranks);

/* Pearson correlation of x (n) and y (n); NaN when either is constant or
 * n < 2 (the correlation is undefined). */
double stats_pearson(const double *x, const double *y, size_t n);

/* Spearman's rho of x (n) and y (n) with average ranks for ties: 0 and *rho
 * (NaN when undefined, as stats_pearson), or OBC_ENOMEM. */
int stats_spearman(const double *x, const double *y, size_t n, double *rho);

#endif
