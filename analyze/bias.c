/* Position buckets of a selection and of a score; see bias.h. Integer bucket
 * arithmetic keeps the assignment exact (no floating p/s on a boundary). */
#include "analyze/bias.h"

#include <assert.h>

size_t bias_bucket_of(size_t p, size_t n, size_t buckets) {
  assert(p < n && buckets > 0);
  return (size_t)(((unsigned long long)p * buckets) / n);
}

void bias_selection_shares(const size_t *selected, size_t k, size_t n, size_t buckets,
                           double *share) {
  for (size_t b = 0; b < buckets; b++) share[b] = 0.0;
  if (k == 0) return;
  for (size_t j = 0; j < k; j++) share[bias_bucket_of(selected[j], n, buckets)] += 1.0;
  for (size_t b = 0; b < buckets; b++) share[b] /= (double)k;
}

/* One pass: each bucket's sum in vector lanes (the order depends on the
 * compiler's vector width, not on the threads), the total from the bucket
 * sums. */
void bias_mean_norm_scores(const double *scores, size_t n, size_t buckets, double *mean_norm) {
  for (size_t b = 0; b < buckets; b++) mean_norm[b] = 0.0;
  if (n == 0) return;
  double total = 0.0;
  for (size_t b = 0; b < buckets; b++) {
    /* Positions of bucket b: ceil(b n / B) .. ceil((b+1) n / B) - 1. */
    size_t begin = (size_t)(((unsigned long long)b * n + buckets - 1) / buckets);
    size_t end = (size_t)(((unsigned long long)(b + 1) * n + buckets - 1) / buckets);
    if (end > n) end = n;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (size_t p = begin; p < end; p++) sum += scores[p];
    mean_norm[b] = sum; /* the sum for now */
    total += sum;
  }
  double mean = total / (double)n;
  for (size_t b = 0; b < buckets; b++) {
    size_t begin = (size_t)(((unsigned long long)b * n + buckets - 1) / buckets);
    size_t end = (size_t)(((unsigned long long)(b + 1) * n + buckets - 1) / buckets);
    if (end > n) end = n;
    mean_norm[b] = mean == 0.0 || end <= begin ? 0.0 : mean_norm[b] / (double)(end - begin) / mean;
  }
}
