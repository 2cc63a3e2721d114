/* Average ranks and Spearman's rho; see stats.h. Ranks come from one sort of
 * the positions by (value, position), so ties are grouped deterministically
 * and each group receives the mean of the ranks it spans. */
#include "analyze/stats.h"

#include <math.h>
#include <stdlib.h>

#include "common/obc_error.h"

static double rank_key(double v) { return isnan(v) ? -INFINITY : v; }

static int compare_rank_pairs(const void *a, const void *b) {
  const ObcRankPair *x = a, *y = b;
  double vx = rank_key(x->value), vy = rank_key(y->value);
  if (vx < vy) return -1;
  if (vx > vy) return 1;
  return (x->index > y->index) - (x->index < y->index);
}

void stats_average_ranks(const double *values, size_t n, ObcRankPair *scratch, double *ranks) {
  for (size_t i = 0; i < n; i++) scratch[i] = (ObcRankPair){values[i], i};
  qsort(scratch, n, sizeof *scratch, compare_rank_pairs);
  for (size_t start = 0; start < n;) {
    double v0 = rank_key(scratch[start].value);
    size_t end = start + 1;
    while (end < n && rank_key(scratch[end].value) == v0) end++;
    double mean_rank = 0.5 * (double)(start + 1 + end); /* mean of start+1 .. end */
    for (size_t j = start; j < end; j++) ranks[scratch[j].index] = mean_rank;
    start = end;
  }
}

double stats_pearson(const double *x, const double *y, size_t n) {
  if (n < 2) return NAN;
  double mean_x = 0.0, mean_y = 0.0;
  for (size_t i = 0; i < n; i++) {
    mean_x += x[i];
    mean_y += y[i];
  }
  mean_x /= (double)n;
  mean_y /= (double)n;
  double sxy = 0.0, sxx = 0.0, syy = 0.0;
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
  ObcRankPair *scratch = obc_malloc(n * sizeof *scratch, "spearman sort");
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
