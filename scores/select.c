/* Top-k selection with a deterministic tie rule and the recall / retention
 * measures built on it; see select.h. A min-heap of the `count` best positions
 * seen so far keeps the worst at its root, so most positions cost one
 * comparison. */
#include "scores/select.h"

#include <assert.h>
#include <math.h>

/* True when position a (score sa) ranks above position b (score sb). */
static int ranks_above(double sa, size_t a, double sb, size_t b) {
  if (isnan(sa)) sa = -INFINITY;
  if (isnan(sb)) sb = -INFINITY;
  if (sa != sb) return sa > sb;
  return a < b;
}

/* Restores the heap below slot i; the root holds the lowest-ranked entry. */
static void heap_sift_down(const double *scores, size_t *heap, size_t size, size_t i) {
  for (;;) {
    size_t worst = i;
    size_t left = 2 * i + 1, right = 2 * i + 2;
    if (left < size &&
        ranks_above(scores[heap[worst]], heap[worst], scores[heap[left]], heap[left]))
      worst = left;
    if (right < size &&
        ranks_above(scores[heap[worst]], heap[worst], scores[heap[right]], heap[right]))
      worst = right;
    if (worst == i) return;
    size_t tmp = heap[i];
    heap[i] = heap[worst];
    heap[worst] = tmp;
    i = worst;
  }
}

void select_rank_top(const double *scores, size_t n, size_t count, size_t *ranked) {
  assert(count <= n);
  if (count == 0) return;
  for (size_t p = 0; p < count; p++) ranked[p] = p;
  for (size_t i = count / 2; i-- > 0;) heap_sift_down(scores, ranked, count, i);
  for (size_t p = count; p < n; p++) {
    if (!ranks_above(scores[p], p, scores[ranked[0]], ranked[0])) continue;
    ranked[0] = p;
    heap_sift_down(scores, ranked, count, 0);
  }
  /* Heap sort in place: repeatedly move the lowest-ranked root to the end,
   * which leaves the array best first. */
  for (size_t size = count; size > 1; size--) {
    size_t tmp = ranked[0];
    ranked[0] = ranked[size - 1];
    ranked[size - 1] = tmp;
    heap_sift_down(scores, ranked, size - 1, 0);
  }
}

void select_rank_top_sorted(const StatsRankPair *sorted, size_t n, size_t limit, size_t count,
                            size_t *ranked) {
  size_t got = 0, end = n;
  while (got < count && end > 0) {
    size_t start = end - 1;
    while (start > 0 && sorted[start - 1].key == sorted[end - 1].key) start--;
    for (size_t j = start; j < end && got < count; j++)
      if (sorted[j].index < limit) ranked[got++] = sorted[j].index;
    end = start;
  }
  assert(got == count);
}

void select_budget_from_ranking(const size_t *ranked, size_t n, size_t k, size_t recent,
                                size_t *selected) {
  assert(k <= n && (recent < k || k == 0));
  size_t best = k - recent;
  for (size_t j = 0; j < best; j++) selected[j] = ranked[j];
  for (size_t j = 0; j < recent; j++) selected[best + j] = n - recent + j;
}

void select_budget(const double *scores, size_t n, size_t k, size_t recent, size_t *selected) {
  assert(k <= n && (recent < k || k == 0));
  select_rank_top(scores, n - recent, k - recent, selected);
  for (size_t j = 0; j < recent; j++) selected[k - recent + j] = n - recent + j;
}

void select_rank_index(const size_t *ranked, size_t count, size_t n, size_t *rank_of) {
  for (size_t p = 0; p < n; p++) rank_of[p] = OBC_RANK_NONE;
  for (size_t j = 0; j < count; j++) {
    assert(ranked[j] < n);
    rank_of[ranked[j]] = j;
  }
}

double select_recall(const size_t *selected, size_t k, const size_t *reference_rank_of) {
  if (k == 0) return 0.0;
  size_t hits = 0;
  for (size_t j = 0; j < k; j++) hits += reference_rank_of[selected[j]] < k;
  return (double)hits / (double)k;
}

double select_span_retention(const size_t *selected, size_t k, size_t begin, size_t end) {
  if (end <= begin) return 0.0;
  size_t kept = 0;
  for (size_t j = 0; j < k; j++) kept += selected[j] >= begin && selected[j] < end;
  return (double)kept / (double)(end - begin);
}
