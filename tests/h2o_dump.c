/* Test helper for tests/test_h2o_reference.py: writes h2o_scores of every
 * layer of TRACE to OUT as raw little-endian doubles, for H2O_ACCUMULATED
 * then H2O_OBSERVED, each for the agnostic rows then all rows, each for
 * H2O_ATTN, H2O_OBC_V, H2O_OBC_K, H2O_OBC_VK, each layer's (n_kv_heads, n)
 * with n the positions the variant's rows saw. */
#include <stdio.h>
#include <stdlib.h>

#include "common/obc_error.h"
#include "evict/h2o.h"
#include "traces/trace.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: h2o_dump TRACE OUT\n");
    return 2;
  }
  TraceReader *r = NULL;
  int rc = trace_open(argv[1], &r);
  FILE *out = rc ? NULL : fopen(argv[2], "wb");
  if (!rc && !out) rc = obc_fail(OBC_EIO, "%s: cannot create", argv[2]);
  const TraceMeta *m = rc ? NULL : trace_meta(r);
  double *scores = rc ? NULL : malloc(m->model.n_kv_heads * m->n_prompt * sizeof *scores);
  if (!rc && !scores) rc = OBC_ENOMEM;
  for (int form = H2O_ACCUMULATED; !rc && form <= H2O_OBSERVED; form++)
    for (int v = 0; !rc && v < TRACE_ROWS_VARIANTS; v++) {
      size_t n = v == TRACE_ROWS_AGNOSTIC ? m->agnostic_rows : m->n_prompt;
      for (int t = H2O_ATTN; !rc && t <= H2O_OBC_VK; t++)
        for (size_t layer = 0; !rc && layer < m->model.n_layers; layer++) {
          rc = h2o_scores(r, layer, n, (TraceSumRows)v, (H2oTerm)t, (H2oForm)form, scores);
          size_t count = m->model.n_kv_heads * n;
          if (!rc && fwrite(scores, sizeof *scores, count, out) != count)
            rc = obc_fail(OBC_EIO, "%s: write failed", argv[2]);
        }
    }
  if (out && fclose(out) && !rc) rc = obc_fail(OBC_EIO, "%s: write failed", argv[2]);
  free(scores);
  trace_close(r);
  if (rc) fprintf(stderr, "h2o_dump: %s\n", obc_error_message());
  return rc ? 1 : 0;
}
