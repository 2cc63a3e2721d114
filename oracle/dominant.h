/* Rows where one key takes more than half the attention (an attention sink):
 * every per-pair quantity of that (row, key) pair, recomputed in double from
 * q, K and V without the trace's stored lse or O (docs/SCIENCE.md, "A key
 * that takes nearly all the attention").
 *
 * There 1 - A can be ~1e-7 and o - v_p = (1 - A)(u - v_p) just as small, below
 * the rounding of a stored float lse (ulp ~5e-7 at lse ~ 20) and of a stored
 * float O; so the row's attention is redone over every causal key: with
 * w_j = exp(z_j - z_p) (j != p), m = sum w_j and u = sum w_j v_j / m (the
 * output of attention over the other keys), A = 1/(1 + m), 1 - A = m/(1 + m)
 * exactly as computed. The table is built in bulk (dgemm over row chunks) for
 * the rows a call uses and read by oracle/oracle.c and scores/scores.c. */
#ifndef OBC_DOMINANT_H
#define OBC_DOMINANT_H

#include <stddef.h>
#include <stdint.h>

#include "oracle/exact_forms.h"
#include "oracle/oracle.h"
#include "oracle/oracle_gemm.h"

/* position of a row where no key has A > 1/2 */
#define ORACLE_DOMINANT_NONE SIZE_MAX

/* One (query head, row): its dominant key and that pair's quantities. */
typedef struct {
  size_t position;       /* p with A_ip > 1/2, or ORACLE_DOMINANT_NONE */
  OraclePairForms forms; /* every quantity of the pair (row, p), when there is one */
} OracleDominantPair;

typedef struct {
  size_t row_begin, row_end; /* rows covered */
  OracleDominantPair *pairs; /* (group_size, row_end - row_begin) */
} OracleDominant;

/* Rows per GEMM of the table. */
enum { ORACLE_DOMINANT_ROW_CHUNK = 64 };

/* Finds the dominant key of rows row_begin..row_end-1 of every query head of
 * the group and computes its pair's quantities, in double. The rows are cut
 * into chunks of ORACLE_DOMINANT_ROW_CHUNK from row_end downwards, one GEMM
 * each; a row's numbers depend on its chunk only (never on the thread count).
 * A caller whose numbers must not depend on row_begin either passes
 * oracle_dominant_whole_chunks' begin. OBC_ENOMEM when memory runs out. */
int oracle_dominant_init(OracleDominant *table, const OracleHead *head, size_t row_begin,
                         size_t row_end);
void oracle_dominant_free(OracleDominant *table);

/* The first row of whole chunks ending at row_end that cover row_begin (or
 * row 0): the same chunks, hence the same numbers, for every row_begin. */
static inline size_t oracle_dominant_whole_chunks(size_t row_begin, size_t row_end) {
  size_t chunks = (row_end - row_begin + ORACLE_DOMINANT_ROW_CHUNK - 1) / ORACLE_DOMINANT_ROW_CHUNK;
  size_t span = chunks * ORACLE_DOMINANT_ROW_CHUNK;
  return span < row_end ? row_end - span : 0;
}

/* The entry of query head j, row `row` (row_begin <= row < row_end). */
static inline const OracleDominantPair *oracle_dominant_pair(const OracleDominant *table, size_t j,
                                                             size_t row) {
  return table->pairs + j * (table->row_end - table->row_begin) + (row - table->row_begin);
}

/* The pair's quantities from its logit z, m = sum_{j != p} w_j (0 < m < 1),
 * v = v_p (d) and u (d), the output of attention over the other keys
 * (docs/SCIENCE.md, "A key that takes nearly all the attention"). */
void oracle_dominant_forms(double z, double m, const double *v, const double *u, size_t d,
                           OraclePairForms *f);

/* A row whose only live key is p (m = 0): o = v_p, the whole stored output
 * o (d) is lost by remove and exact_vk. */
void oracle_dominant_single_forms(double z, const double *v, const double *o, size_t d,
                                  OraclePairForms *f);

/* Logits z (n_keys) of a row with `live` causal keys into weights
 * w_j = exp(z_j - z_p) in place (0 at the top key p and from live on);
 * returns m = sum w_j, *top = p (the first of equal maxima), *z_top = z_p.
 * The row has a dominant key when m < 1. */
double oracle_dominant_row_weights(double *z, size_t n_keys, size_t live, size_t *top,
                                   double *z_top);

/* A row is tested for a dominant key (m < 1) only when its largest weight by
 * the stored lse, exp(z_max - lse), reaches this: A > 1/2 with the stored
 * lse off by less than ln(1/0.45) = 0.1 (a float lse is off by ~1e-6). */
#define ORACLE_DOMINANT_CANDIDATE 0.45

/* w[t] = exp(z[t] - z_top) for t in lo..hi-1 (z: a row's logits); returns
 * their sum. The _f form reads float logits (z = scale * z_float) and
 * stores float weights (for sgemm), summing the unrounded ones. */
double oracle_dominant_weights_d(const double *restrict z, double *restrict w, size_t lo, size_t hi,
                                 double z_top);
double oracle_dominant_weights_f(const float *restrict z, float *restrict w, size_t lo, size_t hi,
                                 double scale, double z_top);

/* One row's dominant pair from the logits of a GEMM the caller already did
 * (the window sweep's and the oracle's rows). z: the row's logits, `live`
 * causal keys of n_keys, floats (times the head's attn_scale) or doubles as
 * gemm->precision says; w: the row's weight slot (n_keys, the same type);
 * lse: the row's stored lse; o: its stored output (head_dim). Rows below the
 * ORACLE_DOMINANT_CANDIDATE bar are not tested. Sets *pair (position
 * ORACLE_DOMINANT_NONE when no key has A > 1/2; the forms when p is the only
 * live key). Returns m = sum_{j != p} w_j when the row needs the weighted
 * values (0 < m < 1: its weights are left in w, *z_top = z_p), else 0. */
double oracle_dominant_find(const OracleGemm *gemm, const void *z, void *w, size_t live,
                            size_t n_keys, double lse, const double *o, OracleDominantPair *pair,
                            double *z_top);

/* The forms of the rows i < n with m[i] > 0 (oracle_dominant_find's return):
 * their weights (row i at w + i * ld elements) packed to the front in row
 * order, one product u = W V (u: n rows of head_dim elements), then each
 * pair's quantities from u / m and z_top. packed: (n) scratch. */
void oracle_dominant_values(const OracleGemm *gemm, size_t n, size_t n_keys, void *w, size_t ld,
                            void *u, const double *m, const double *z_top, size_t *packed,
                            OracleDominantPair *pairs);

#endif
