/* H2O and H2O+OBC scores from the column sums of a trace (evict/h2o.h).
 * Accumulated (the H2O paper's heavy-hitter score): the sums of the query
 * heads of each KV head added up. Observed (kvpress
 * ObservedAttentionPress): each query head's sum divided by the number of
 * queries that could attend the token (torch.arange(n, 0, -1)), then the
 * mean of the query heads of each KV head (view(..., n_kv_heads, group,
 * n).mean(2)), in that order. */
#include "evict/h2o.h"

#include <assert.h>
#include <stdlib.h>

#include "common/obc_error.h"

int h2o_scores(TraceReader *r, size_t layer, size_t n_candidates, TraceSumRows rows, H2oTerm term,
               H2oForm form, double *out) {
  return h2o_scores_less(r, layer, n_candidates, rows, term, form, NULL, 0, out);
}

int h2o_scores_less(TraceReader *r, size_t layer, size_t n_candidates, TraceSumRows rows,
                    H2oTerm term, H2oForm form, const double *less, size_t less_rows, double *out) {
  const TraceMeta *m = trace_meta(r);
  assert(layer < m->model.n_layers && out);
  assert(term >= H2O_ATTN && term <= H2O_OBC_VK);
  assert(form == H2O_ACCUMULATED || form == H2O_OBSERVED);
  size_t n = m->n_prompt, heads = m->model.n_heads, group = heads / m->model.n_kv_heads;
  if (!m->has_column_sums)
    return trace_read_column_sums(r, layer, rows, NULL, NULL, NULL); /* its OBC_ENOTFOUND */
  size_t seen = rows == TRACE_ROWS_AGNOSTIC ? m->agnostic_rows : n;
  if (n_candidates > seen)
    return obc_fail(OBC_EINVAL,
                    "%s: H2O scores %zu positions, but only the first %zu were seen by the %s "
                    "rows",
                    trace_path(r), n_candidates, seen,
                    rows == TRACE_ROWS_AGNOSTIC ? "query-agnostic (context)" : "prompt");
  double *sums = trace_alloc(r, (term == H2O_ATTN ? 1 : TRACE_OBC_TERMS) * heads * n, sizeof *sums,
                             "column sums of one layer");
  int64_t *counts = sums ? trace_alloc(r, n, sizeof *counts, "column counts") : NULL;
  if (!sums || !counts) {
    free(sums);
    return OBC_ENOMEM;
  }
  int rc = term == H2O_ATTN ? trace_read_column_sums(r, layer, rows, sums, NULL, counts)
                            : trace_read_column_sums(r, layer, rows, NULL, sums, counts);
  const double *plane = term == H2O_ATTN ? sums : sums + (size_t)(term - H2O_OBC_V) * heads * n;
#define SUM(h, p) (plane[(h)*n + (p)] - (less ? less[(h)*n_candidates + (p)] : 0.0))
  for (size_t p = 0; !rc && p < n_candidates; p++)
    if (counts[p] <= (int64_t)less_rows)
      rc = obc_fail(OBC_EINVAL, "%s: position %zu was seen by %lld rows, not more than %zu",
                    trace_path(r), p, (long long)counts[p], less_rows);
  for (size_t g = 0; !rc && g < m->model.n_kv_heads; g++)
    for (size_t p = 0; p < n_candidates; p++) {
      double total = 0.0, count = (double)(counts[p] - (int64_t)less_rows);
      if (form == H2O_ACCUMULATED) {
        for (size_t h = g * group; h < (g + 1) * group; h++) total += SUM(h, p);
        out[g * n_candidates + p] = total;
        continue;
      }
      for (size_t h = g * group; h < (g + 1) * group; h++) total += SUM(h, p) / count;
      out[g * n_candidates + p] = total / group;
    }
#undef SUM
  free(sums);
  free(counts);
  return rc;
}
