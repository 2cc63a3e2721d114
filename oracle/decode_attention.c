/* decode_attn (oracle/decode_attention.h): the logits of the decode rows
 * against blocks of prompt keys come from the oracle's GEMM helper
 * (oracle/oracle_gemm.h); A = exp(z - lse) is summed in a fixed order (heads,
 * then steps), so the result does not depend on the thread count. */
#include "oracle/decode_attention.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "oracle/oracle_gemm.h"

enum { DECODE_ATTN_BLOCK = 2048 };

int oracle_decode_attention(const OracleHead *head, size_t first_step, size_t n_steps,
                            OraclePrecision precision, double *out) {
  assert(head && out);
  size_t s = head->n_prompt, first = 0;
  int rc = oracle_decode_rows(head, "decode_attn", first_step, n_steps, &first);
  if (rc) return rc;
  memset(out, 0, s * sizeof *out);
  size_t block = s < DECODE_ATTN_BLOCK ? s : DECODE_ATTN_BLOCK;
  OracleGemm gemm;
  rc = oracle_gemm_init(&gemm, head, s, precision);
  if (rc) return rc;
  double *z = obc_malloc(2 * n_steps * block * sizeof *z, "decode logits"); /* z, then vo */
  float *scratch = precision == OBC_PRECISION_FLOAT
                       ? obc_malloc(2 * n_steps * block * sizeof *scratch, "float decode logits")
                       : NULL;
  if (!z || (precision == OBC_PRECISION_FLOAT && !scratch)) rc = OBC_ENOMEM;
  /* Decode rows sit at positions >= s: every prompt key is causal to them. */
  for (size_t b0 = 0; b0 < s && !rc; b0 += block) {
    size_t nb = s - b0 < block ? s - b0 : block;
    for (size_t j = 0; j < head->group_size; j++) {
      oracle_gemm_block(&gemm, j, first, n_steps, b0, nb, z, z + n_steps * block, scratch);
      for (size_t r = 0; r < n_steps; r++) {
        double lse = head->lse[j * head->n_rows + first + r];
        for (size_t t = 0; t < nb; t++) out[b0 + t] += exp(z[r * nb + t] - lse);
      }
    }
  }
  free(z);
  free(scratch);
  oracle_gemm_free(&gemm);
  return rc;
}
