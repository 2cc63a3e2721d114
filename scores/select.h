/* Which prompt positions a score keeps (docs/SCIENCE.md, "Recall of the
 * oracle"): the last r positions (the recent window) plus the k - r
 * highest-scoring others, ties broken by lower position first so every run
 * selects the same set.
 *
 * Selection is a bounded heap (O(n log k)), never a full sort; a ranking of
 * the best `count` candidates serves every budget up to `count` at once
 * (the top k - r of a ranking are its first k - r entries). */
#ifndef OBC_SELECT_H
#define OBC_SELECT_H

#include <stddef.h>

#include "scores/stats.h"

/* Marks positions outside a ranking in select_rank_index's output. */
#define OBC_RANK_NONE ((size_t)-1)

/* The `count` best positions among 0..n-1 of scores (n), best first: higher
 * score first, equal scores by lower position. NaN ranks below every number.
 * ranked: (count), count <= n. */
void select_rank_top(const double *scores, size_t n, size_t count, size_t *ranked);

/* The same ranking as select_rank_top(scores, limit, count, ranked), read
 * off the ascending sort of all n scores (stats_sort_values): walk it from
 * the end, each group of equal scores in position order, skipping positions
 * >= limit. O(count + skipped) instead of a pass over the scores. */
void select_rank_top_sorted(const StatsRankPair *sorted, size_t n, size_t limit, size_t count,
                            size_t *ranked);

/* Selection for budget k and recent window r < k (or r == 0 < k) over n
 * positions: the k - r best of positions 0..n-r-1 (best first), then the
 * recent positions n-r..n-1 in order. selected: (k), k <= n. */
void select_budget(const double *scores, size_t n, size_t k, size_t recent, size_t *selected);

/* Same, from a ranking of positions 0..n-r-1 computed beforehand with
 * select_rank_top(scores, n - r, count, ranked) and k - r <= count. */
void select_budget_from_ranking(const size_t *ranked, size_t n, size_t k, size_t recent,
                                size_t *selected);

/* rank_of (n): rank_of[ranked[j]] = j for the `count` ranked positions,
 * OBC_RANK_NONE for every other position. */
void select_rank_index(const size_t *ranked, size_t count, size_t n, size_t *rank_of);

/* recall@k = |selected ∩ reference top-k| / k, where reference_rank_of is the
 * select_rank_index of the reference ranking (e.g. the oracle's). selected:
 * (k) distinct positions. */
double select_recall(const size_t *selected, size_t k, const size_t *reference_rank_of);

/* Share of the span [begin, end) that the selection (k) keeps; 0 for an empty
 * span. */
double select_span_retention(const size_t *selected, size_t k, size_t begin, size_t end);

#endif
