/* Exact window errors, the true eviction error (oracle@1, oracle@T) and set
 * eviction for one (layer, KV head), from the per-pair closed forms of
 * oracle/exact_forms.h (docs/SCIENCE.md, "Exact errors over the window").
 *
 * This is the plain path: one quantity at a time, GEMMs blocked over prompt
 * positions and rows, OpenMP over position blocks (each output element is
 * accumulated by one thread in a fixed order, so results do not depend on the
 * thread count). The pair of a row with A > 1/2 comes from oracle/dominant.h,
 * recomputed from q, K, V rather than the stored lse and O (docs/SCIENCE.md).
 * scores/scores.c fuses the same forms for many windows. */
#include "oracle/oracle.h"

#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_search.h"
#include "oracle/dominant.h"
#include "oracle/exact_forms.h"
#include "oracle/oracle_gemm.h"

enum { ORACLE_BLOCK = 512, ORACLE_ROW_CHUNK = 128 };

/* Index of the captured row at `position`, or the first row after it. */
static size_t oracle_lower_row(const OracleHead *head, int64_t position) {
  return obc_lower_bound_i64(head->row_positions, head->n_rows, position);
}

static double oracle_pick(const OraclePairForms *f, OracleExactKind kind) {
  switch (kind) {
    case OBC_EXACT_V: return f->obc_v;
    case OBC_EXACT_K: return f->exact_k;
    case OBC_EXACT_VK: return f->exact_vk;
    default: return f->remove;
  }
}

typedef struct {
  const OracleHead *head;
  const OracleGemm *gemm;
  OracleExactKind kind;
  size_t row_begin, row_end;      /* captured rows to sum over */
  const double *v_sq;             /* (n_prompt) ||v_p||^2 */
  const double *o_sq;             /* (group_size, n_rows) ||o_i||^2 */
  const OracleDominant *dominant; /* rows row_begin..row_end-1 */
} OracleJob;

/* Per-thread GEMM outputs for one (row chunk, position block). */
typedef struct {
  double *z;      /* (ORACLE_ROW_CHUNK, ORACLE_BLOCK) */
  double *vo;     /* (ORACLE_ROW_CHUNK, ORACLE_BLOCK) */
  float *scratch; /* (2, ORACLE_ROW_CHUNK, ORACLE_BLOCK), FLOAT only */
} OracleWork;

/* out[p] for p in b0..b0+nb-1: every row's error, heads in order, rows in order. */
static void oracle_accumulate_block(const OracleJob *job, size_t b0, size_t nb, OracleWork *work,
                                    double *out) {
  const OracleHead *head = job->head;
  for (size_t chunk = job->row_begin; chunk < job->row_end; chunk += ORACLE_ROW_CHUNK) {
    size_t c0 = chunk;
    size_t c1 = chunk + ORACLE_ROW_CHUNK < job->row_end ? chunk + ORACLE_ROW_CHUNK : job->row_end;
    /* Rows before b0 see none of this block (causality). */
    while (c0 < c1 && head->row_positions[c0] < (int64_t)b0) c0++;
    if (c0 == c1) continue;
    for (size_t j = 0; j < head->group_size; j++) {
      if (c1 - c0 == 1)
        oracle_gemm_row(job->gemm, j, c0, b0, nb, work->z, work->vo, work->scratch);
      else
        oracle_gemm_block(job->gemm, j, c0, c1 - c0, b0, nb, work->z, work->vo, work->scratch);
      for (size_t row = c0; row < c1; row++) {
        size_t last = (size_t)head->row_positions[row] - b0 + 1;
        size_t len = last < nb ? last : nb;
        size_t ho = j * head->n_rows + row;
        const double *z = work->z + (row - c0) * nb, *vo = work->vo + (row - c0) * nb;
        const OracleDominantPair *dominant = oracle_dominant_pair(job->dominant, j, row);
        double lse = head->lse[ho], e = exp(-lse), oo = job->o_sq[ho];
        for (size_t t = 0; t < len; t++) {
          size_t p = b0 + t;
          if (p == dominant->position) {
            out[p] += oracle_pick(&dominant->forms, job->kind);
            continue;
          }
          OraclePairForms f;
          oracle_pair_forms_below_half(z[t], job->v_sq[p], vo[t], oo, lse, e, &f);
          out[p] += oracle_pick(&f, job->kind);
        }
      }
    }
  }
}

/* out (n_prompt) = sum over rows row_begin..row_end-1 and the group's heads. */
static int oracle_accumulate_rows(const OracleHead *head, size_t row_begin, size_t row_end,
                                  OracleExactKind kind, OraclePrecision precision, double *out) {
  size_t s = head->n_prompt, d = head->head_dim;
  size_t n_ho = head->group_size * head->n_rows;
  memset(out, 0, s * sizeof *out);
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  size_t work_doubles = (size_t)ORACLE_ROW_CHUNK * ORACLE_BLOCK;
  OracleGemm gemm;
  OracleDominant dominant;
  int rc = oracle_gemm_init(&gemm, head, s, precision);
  if (rc) return rc;
  rc = oracle_dominant_init(&dominant, head, row_begin, row_end);
  if (rc) {
    oracle_gemm_free(&gemm);
    return rc;
  }
  double *v_sq = obc_malloc(s * sizeof *v_sq, "value norms");
  double *o_sq = obc_malloc(n_ho * sizeof *o_sq, "output norms");
  double *zvo = obc_malloc((size_t)threads * 2 * work_doubles * sizeof *zvo, "logit blocks");
  float *scratch =
      precision == OBC_PRECISION_FLOAT
          ? obc_malloc((size_t)threads * 2 * work_doubles * sizeof *scratch, "float logit blocks")
          : NULL;
  if (!v_sq || !o_sq || !zvo || (precision == OBC_PRECISION_FLOAT && !scratch)) {
    rc = OBC_ENOMEM;
    goto done;
  }
  for (size_t p = 0; p < s; p++) {
    double vv = 0.0;
    for (size_t k = 0; k < d; k++) vv += head->V[p * d + k] * head->V[p * d + k];
    v_sq[p] = vv;
  }
  for (size_t i = 0; i < n_ho; i++) {
    double oo = 0.0;
    for (size_t k = 0; k < d; k++) oo += head->O[i * d + k] * head->O[i * d + k];
    o_sq[i] = oo;
  }
  OracleJob job = {head, &gemm, kind, row_begin, row_end, v_sq, o_sq, &dominant};
  size_t n_blocks = (s + ORACLE_BLOCK - 1) / ORACLE_BLOCK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t b = 0; b < n_blocks; b++) {
    size_t t = (size_t)omp_get_thread_num();
    OracleWork work = {zvo + t * 2 * work_doubles, zvo + t * 2 * work_doubles + work_doubles,
                       scratch ? scratch + t * 2 * work_doubles : NULL};
    size_t b0 = b * ORACLE_BLOCK, nb = s - b0 < ORACLE_BLOCK ? s - b0 : ORACLE_BLOCK;
    oracle_accumulate_block(&job, b0, nb, &work, out);
  }
done:
  free(v_sq);
  free(o_sq);
  free(zvo);
  free(scratch);
  oracle_dominant_free(&dominant);
  oracle_gemm_free(&gemm);
  return rc;
}

int oracle_window_error(const OracleHead *head, size_t window, OracleExactKind kind,
                        OraclePrecision precision, double *out) {
  assert(head && out && kind < OBC_EXACT_COUNT);
  size_t s = head->n_prompt;
  if (window < 1 || window > s)
    return obc_fail(OBC_EINVAL,
                    "window error: window %zu out of range (expected 1..%zu prompt rows)", window,
                    s);
  size_t first = oracle_lower_row(head, (int64_t)(s - window));
  size_t last = oracle_lower_row(head, (int64_t)s); /* one past the last prompt row */
  if (last - first != window || head->row_positions[first] != (int64_t)(s - window))
    return obc_fail(OBC_EINVAL,
                    "window error: the last %zu prompt rows are not all captured (expected "
                    "positions %zu..%zu, found %zu of them; hint: capture a larger window)",
                    window, s - window, s - 1, last - first);
  return oracle_accumulate_rows(head, first, last, kind, precision, out);
}

int oracle_decode_rows(const OracleHead *head, const char *what, size_t first_step, size_t n_steps,
                       size_t *row) {
  size_t first = oracle_lower_row(head, (int64_t)head->n_prompt);
  size_t available = head->n_rows - first;
  if (first_step < 1 || n_steps < 1 || first_step - 1 + n_steps > available)
    return obc_fail(OBC_EINVAL,
                    "%s@%zu-%zu: needs decode rows of steps %zu..%zu (expected positions >= "
                    "%zu, found %zu decode rows; hint: capture more decode steps)",
                    what, first_step, first_step + n_steps - 1, first_step,
                    first_step + n_steps - 1, head->n_prompt, available);
  *row = first + first_step - 1;
  return OBC_OK;
}

int oracle_eviction_error(const OracleHead *head, size_t first_step, size_t n_steps,
                          OraclePrecision precision, double *out) {
  assert(head && out);
  size_t first = 0;
  int rc = oracle_decode_rows(head, "oracle", first_step, n_steps, &first);
  if (rc) return rc;
  return oracle_accumulate_rows(head, first, first + n_steps, OBC_EXACT_REMOVE, precision, out);
}

static double oracle_logit(const OracleHead *head, const double *q, size_t p) {
  const double *k = head->K + p * head->head_dim;
  double dot = 0.0;
  for (size_t c = 0; c < head->head_dim; c++) dot += q[c] * k[c];
  return head->attn_scale * dot;
}

int oracle_set_eviction_output(const OracleHead *head, size_t j, size_t r,
                               const unsigned char *keep, double *o_new, double *mass_lost) {
  assert(head && keep && o_new && mass_lost && j < head->group_size && r < head->n_rows);
  size_t d = head->head_dim, ho = j * head->n_rows + r;
  size_t n_live = (size_t)head->row_positions[r] + 1;
  if (n_live > head->n_positions) n_live = head->n_positions;
  const double *q = head->Q + ho * d, *o = head->O + ho * d;
  double lse = head->lse[ho];
  /* Pass 1: the evicted mass, and the largest kept logit. */
  double evicted = 0.0, kept_max = -HUGE_VAL;
  size_t n_kept = 0;
  for (size_t p = 0; p < n_live; p++) {
    double z = oracle_logit(head, q, p);
    if (keep[p]) {
      n_kept++;
      kept_max = z > kept_max ? z : kept_max;
    } else {
      evicted += exp(z - lse);
    }
  }
  if (n_kept == 0) {
    memset(o_new, 0, d * sizeof *o_new);
    *mass_lost = 1.0;
    return 0;
  }
  *mass_lost = evicted;
  if (evicted <= 0.5) {
    /* o' = (o - sum_E A_p v_p) / (1 - sum_E A_p): 1 - mass >= 1/2, no cancellation. */
    memcpy(o_new, o, d * sizeof *o_new);
    for (size_t p = 0; p < n_live; p++) {
      if (keep[p]) continue;
      double a = exp(oracle_logit(head, q, p) - lse);
      for (size_t c = 0; c < d; c++) o_new[c] -= a * head->V[p * d + c];
    }
    for (size_t c = 0; c < d; c++) o_new[c] /= 1.0 - evicted;
    return 0;
  }
  /* Most of the mass is gone: the same o', renormalised over the kept keys
   * directly (o - sum_E A v would cancel). */
  double total = 0.0;
  memset(o_new, 0, d * sizeof *o_new);
  for (size_t p = 0; p < n_live; p++) {
    if (!keep[p]) continue;
    double w = exp(oracle_logit(head, q, p) - kept_max);
    total += w;
    for (size_t c = 0; c < d; c++) o_new[c] += w * head->V[p * d + c];
  }
  for (size_t c = 0; c < d; c++) o_new[c] /= total;
  return 0;
}
