/* Lower-bound search over a sorted array of positions.
 *
 * Traces store the positions of their captured rows in a strictly increasing
 * array; both the trace reader and the oracle look rows up by position, so
 * the search lives here, below both, as one inline function. */
#ifndef OBC_SEARCH_H
#define OBC_SEARCH_H

#include <stddef.h>
#include <stdint.h>

/* Index of the first element of sorted (n elements, non-decreasing) that is
 * >= value; n when every element is smaller. */
static inline size_t obc_lower_bound_i64(const int64_t *sorted, size_t n, int64_t value) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < value)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

#endif
