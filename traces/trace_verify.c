/* Recomputing a trace from its own inputs (traces/trace_verify.h). */
#include "traces/trace_verify.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "traces/trace_attend.h"

/* The sums verify recomputes: col_attn, then the TRACE_OBC_TERMS terms. */
enum { VERIFY_SUM_TERMS = 1 + TRACE_OBC_TERMS };

static void record(TraceVerifyWorst *w, double value, size_t layer, size_t head, size_t row) {
  if (!(value <= w->worst)) { /* also catches NaN */
    w->worst = value;
    w->layer = layer, w->head = head, w->row = row;
  }
}

/* Thread-private buffers for one KV head and its query heads. */
typedef struct {
  float *K, *V;                   /* stored: (P, d) each */
  double *Kd, *Vd;                /* the same in double */
  float *Q, *O, *lse, *A;         /* stored: (R, d), (R, d), (R), (R, P) */
  double *Qd, *Od, *lsed, *probs; /* exact: (R, d), (R, d), (R), (R, P) */
  TraceVerifyWorst worst[TRACE_VERIFY_KINDS];
  /* With column sums: the captured prompt rows' terms of each sum (the
   * exact A, and the OBCache terms from it, the stored O and V) summed per
   * position, (n_heads, TRACE_ROWS_VARIANTS, VERIFY_SUM_TERMS, n_prompt),
   * shared by the threads (each head writes its own rows). */
  double *captured_sums;
  /* With column sums: ||v_p||^2 of every prompt position, (n_kv_heads,
   * n_prompt), shared (each KV head writes its own row). */
  double *v_norms;
} VerifyScratch;

static void scratch_free(VerifyScratch *s) {
  free(s->K), free(s->V), free(s->Kd), free(s->Vd);
  free(s->Q), free(s->O), free(s->lse), free(s->A), free(s->Qd), free(s->Od), free(s->lsed),
      free(s->probs);
  memset(s, 0, sizeof *s);
}

/* Sizes are products of the trace's extents, which trace_open bounds so that
 * none wraps; each buffer only when the ones before it were allocated, so
 * the message names the first that did not fit. */
static int scratch_alloc(VerifyScratch *s, const TraceReader *reader) {
  const TraceMeta *m = trace_meta(reader);
  const TraceReader *r = reader;
  size_t R = m->n_rows, d = m->model.head_dim, P = m->n_positions;
  memset(s, 0, sizeof *s);
  bool allocated =
      (s->K = trace_alloc(r, P * d, sizeof(float), "K of one KV head")) &&
      (s->V = trace_alloc(r, P * d, sizeof(float), "V of one KV head")) &&
      (s->Kd = trace_alloc(r, P * d, sizeof(double), "K of one KV head (double)")) &&
      (s->Vd = trace_alloc(r, P * d, sizeof(double), "V of one KV head (double)")) &&
      (s->Q = trace_alloc(r, R * d, sizeof(float), "Q of one head")) &&
      (s->O = trace_alloc(r, R * d, sizeof(float), "O of one head")) &&
      (s->lse = trace_alloc(r, R, sizeof(float), "lse of one head")) &&
      (!m->has_attn || (s->A = trace_alloc(r, R * P, sizeof(float), "A of one head"))) &&
      (s->Qd = trace_alloc(r, R * d, sizeof(double), "Q of one head (double)")) &&
      (s->Od = trace_alloc(r, R * d, sizeof(double), "the exact O of one head")) &&
      (s->lsed = trace_alloc(r, R, sizeof(double), "the exact lse of one head")) &&
      (s->probs = trace_alloc(r, R * P, sizeof(double), "the exact A of one head"));
  if (!allocated) {
    scratch_free(s);
    return OBC_ENOMEM;
  }
  s->worst[TRACE_VERIFY_LSE].name = "lse", s->worst[TRACE_VERIFY_O].name = "O",
  s->worst[TRACE_VERIFY_A].name = "A";
  return OBC_OK;
}

/* Compares one query head against the exact recomputation from s->Kd, s->Vd. */
static int verify_head(TraceReader *reader, size_t layer, size_t head, VerifyScratch *s) {
  const TraceMeta *m = trace_meta(reader);
  size_t R = m->n_rows, d = m->model.head_dim, P = m->n_positions;
  int rc = trace_read_rows(reader, layer, head, s->Q, s->O, s->lse);
  if (!rc && s->A) rc = trace_read_attn(reader, layer, head, s->A);
  if (rc) return rc;
  for (size_t i = 0; i < R * d; i++) s->Qd[i] = s->Q[i];
  TraceAttendShape shape = {R, P, d, m->model.attn_scale, m->row_positions};
  trace_attend_rows(&shape, s->Qd, s->Kd, s->Vd, s->probs, s->Od, s->lsed);
  for (size_t i = 0; i < R; i++) {
    record(&s->worst[TRACE_VERIFY_LSE], fabs(s->lse[i] - s->lsed[i]) / fmax(1.0, fabs(s->lsed[i])),
           layer, head, i);
    double diff2 = 0.0, norm2 = 0.0;
    for (size_t j = 0; j < d; j++) {
      double exact = s->Od[i * d + j], delta = s->O[i * d + j] - exact;
      diff2 += delta * delta, norm2 += exact * exact;
    }
    record(&s->worst[TRACE_VERIFY_O], sqrt(diff2) / fmax(sqrt(norm2), 1e-30), layer, head, i);
    if (s->A) {
      double worst = 0.0;
      for (size_t p = 0; p < P; p++)
        worst = fmax(worst, fabs(s->A[i * P + p] - s->probs[i * P + p]));
      record(&s->worst[TRACE_VERIFY_A], worst, layer, head, i);
    }
  }
  if (s->captured_sums) { /* the captured prompt rows' share of the column sums */
    size_t n = m->n_prompt, group = m->model.n_heads / m->model.n_kv_heads;
    const double *vv = s->v_norms + (head / group) * n;
    double *sums = s->captured_sums + head * TRACE_ROWS_VARIANTS * VERIFY_SUM_TERMS * n;
    memset(sums, 0, TRACE_ROWS_VARIANTS * VERIFY_SUM_TERMS * n * sizeof *sums);
    for (size_t i = 0; i < R && (size_t)m->row_positions[i] < n; i++) {
      size_t position = (size_t)m->row_positions[i];
      const float *o = s->O + i * d;
      double oo = 0.0;
      for (size_t j = 0; j < d; j++) oo += (double)o[j] * o[j];
      for (size_t p = 0; p <= position; p++) {
        /* Legend (capture/capture_sums.c): a = A_ip, x = z_ip = lse_i + log a,
         * w = v_p.o_i, dd = ||v_p - o_i||^2, vd = v_p.(v_p - o_i). */
        double a = s->probs[i * P + p];
        if (!(a > 0.0)) continue;
        const double *v = s->Vd + p * d;
        double w = 0.0;
        for (size_t j = 0; j < d; j++) w += v[j] * o[j];
        double x = s->lsed[i] + log(a), a2 = a * a, dd = vv[p] - 2.0 * w + oo, vd = vv[p] - w;
        double terms[VERIFY_SUM_TERMS] = {a, a2 * vv[p], a2 * x * x * dd,
                                          a2 * (vv[p] + x * x * dd + 2.0 * x * vd)};
        for (size_t k = 0; k < TRACE_ROWS_VARIANTS; k++) {
          if (k == TRACE_ROWS_AGNOSTIC && position >= m->agnostic_rows) continue;
          for (size_t t = 0; t < VERIFY_SUM_TERMS; t++)
            sums[(k * VERIFY_SUM_TERMS + t) * n + p] += terms[t];
        }
      }
    }
  }
  return OBC_OK;
}

/* One KV head: its keys and values, then each of its query heads. */
static int verify_kv_head(TraceReader *reader, size_t layer, size_t kv_head, VerifyScratch *s) {
  const TraceMeta *m = trace_meta(reader);
  size_t n = m->n_positions * m->model.head_dim, group = m->model.n_heads / m->model.n_kv_heads;
  int rc = trace_read_kv(reader, layer, kv_head, s->K, s->V);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) s->Kd[i] = s->K[i], s->Vd[i] = s->V[i];
  size_t d = m->model.head_dim;
  for (size_t p = 0; s->v_norms && p < m->n_prompt; p++) {
    double norm2 = 0.0;
    for (size_t j = 0; j < d; j++) norm2 += s->Vd[p * d + j] * s->Vd[p * d + j];
    s->v_norms[kv_head * m->n_prompt + p] = norm2;
  }
  for (size_t k = 0; !rc && k < group; k++) rc = verify_head(reader, layer, kv_head * group + k, s);
  return rc;
}

/* ---- column sums ------------------------------------------------------------ */

/* What the column sums of a trace (schema 3) must satisfy, beyond what
 * trace_read_column_sums checks (finite, >= 0, exact counts): every agnostic
 * sum is at most the all-rows one (a sum over fewer non-negative terms) and
 * 0 where no agnostic row reached; obc_v at most col_attn x ||v_p||^2; and
 * every sum agrees with the captured rows' terms recomputed from the exact
 * attention, the stored O and V: equal within the tolerance where the
 * captured rows are every row of the variant, at least their sum otherwise. */
typedef struct {
  double *stored_attn; /* (TRACE_ROWS_VARIANTS, n_heads, n_prompt) */
  double *stored_obc;  /* (TRACE_ROWS_VARIANTS, TRACE_OBC_TERMS, n_heads, n_prompt) */
  double *captured;    /* (n_heads, TRACE_ROWS_VARIANTS, VERIFY_SUM_TERMS, n_prompt) */
  double *v_norms;     /* (n_kv_heads, n_prompt) ||v_p||^2 */
  int64_t *counts;     /* (n_prompt) */
  bool complete[TRACE_ROWS_VARIANTS]; /* the captured rows are every row of the variant */
  double worst;                       /* worst relative difference against the captured rows */
  size_t worst_layer, worst_head, worst_position;
} VerifySums;

static int sums_alloc(VerifySums *v, const TraceReader *r) {
  const TraceMeta *m = trace_meta(r);
  size_t plane = m->model.n_heads * m->n_prompt;
  memset(v, 0, sizeof *v);
  v->stored_attn = trace_alloc(r, TRACE_ROWS_VARIANTS * plane, sizeof(double), "column sums");
  v->stored_obc = v->stored_attn ? trace_alloc(r, TRACE_ROWS_VARIANTS * TRACE_OBC_TERMS * plane,
                                               sizeof(double), "OBCache column sums")
                                 : NULL;
  v->captured = v->stored_obc ? trace_alloc(r, TRACE_ROWS_VARIANTS * VERIFY_SUM_TERMS * plane,
                                            sizeof(double), "the captured rows' column sums")
                              : NULL;
  v->counts = v->captured ? trace_alloc(r, m->n_prompt, sizeof(int64_t), "column counts") : NULL;
  v->v_norms =
      v->counts ? trace_alloc(r, m->model.n_kv_heads * m->n_prompt, sizeof(double), "value norms")
                : NULL;
  if (!v->v_norms) {
    free(v->stored_attn), free(v->stored_obc), free(v->captured), free(v->counts);
    return OBC_ENOMEM;
  }
  /* rows [0, end) all captured: the trace's first prompt row is 0 and its
   * prompt rows are contiguous up to end */
  size_t window = trace_meta_window_rows(m);
  for (int k = 0; k < TRACE_ROWS_VARIANTS; k++) {
    size_t end = k == TRACE_ROWS_AGNOSTIC ? m->agnostic_rows : m->n_prompt;
    v->complete[k] = window == m->n_prompt || end == 0;
  }
  return OBC_OK;
}

static void sums_free(VerifySums *v) {
  free(v->stored_attn), free(v->stored_obc), free(v->captured), free(v->counts), free(v->v_norms);
  memset(v, 0, sizeof *v);
}

static int sums_read_layer(TraceReader *r, size_t layer, VerifySums *v) {
  const TraceMeta *m = trace_meta(r);
  size_t plane = m->model.n_heads * m->n_prompt;
  int rc = OBC_OK;
  for (int k = 0; !rc && k < TRACE_ROWS_VARIANTS; k++)
    rc = trace_read_column_sums(r, layer, (TraceSumRows)k, v->stored_attn + k * plane,
                                v->stored_obc + k * TRACE_OBC_TERMS * plane, v->counts);
  return rc;
}

static int sums_check_layer(TraceReader *r, size_t layer, VerifySums *v, double tolerance) {
  const TraceMeta *m = trace_meta(r);
  size_t n = m->n_prompt, heads = m->model.n_heads, plane = heads * n;
  const char *path = trace_path(r);
  /* agnostic <= all, and 0 beyond the agnostic rows */
  for (size_t t = 0; t <= TRACE_OBC_TERMS; t++) {
    const double *agnostic = t == 0 ? v->stored_attn : v->stored_obc + (t - 1) * plane;
    const double *all =
        t == 0 ? v->stored_attn + plane : v->stored_obc + (TRACE_OBC_TERMS + t - 1) * plane;
    const char *name = t == 0   ? "col_attn"
                       : t == 1 ? "col_obc_v"
                       : t == 2 ? "col_obc_k"
                                : "col_obc_vk";
    for (size_t i = 0; i < plane; i++) {
      size_t p = i % n;
      bool ok = p < m->agnostic_rows ? agnostic[i] <= all[i] * (1.0 + tolerance) + 1e-30
                                     : agnostic[i] == 0.0;
      if (!ok)
        return obc_fail(OBC_EFORMAT,
                        "%s: /layers/%03zu/%s, head %zu, position %zu: the agnostic sum %.6g %s",
                        path, layer, name, i / n, p, agnostic[i],
                        p < m->agnostic_rows ? "exceeds the sum over all prompt rows"
                                             : "is not 0 beyond the rows before the question");
    }
  }
  /* obc_v = sum_i A_ip^2 ||v_p||^2 <= ||v_p||^2 sum_i A_ip (0 <= A <= 1):
   * at most the attention sum times the value's norm, from the stored V. */
  size_t group = heads / m->model.n_kv_heads;
  for (int k = 0; k < TRACE_ROWS_VARIANTS; k++)
    for (size_t h = 0; h < heads; h++)
      for (size_t p = 0; p < n; p++) {
        double attn = v->stored_attn[k * plane + h * n + p];
        double obc_v = v->stored_obc[(k * TRACE_OBC_TERMS + TRACE_OBC_V) * plane + h * n + p];
        double bound = attn * v->v_norms[(h / group) * n + p];
        if (obc_v > bound * (1.0 + tolerance) + 1e-30)
          return obc_fail(OBC_EFORMAT,
                          "%s: /layers/%03zu/col_obc_v, rows %s, head %zu, position %zu: %.9g "
                          "exceeds col_attn x ||v||^2 = %.9g (each weight is at most 1)",
                          path, layer, k == TRACE_ROWS_AGNOSTIC ? "agnostic" : "all", h, p, obc_v,
                          bound);
      }
  static const char *const names[VERIFY_SUM_TERMS] = {"col_attn", "col_obc_v", "col_obc_k",
                                                      "col_obc_vk"};
  for (size_t h = 0; h < heads; h++)
    for (int k = 0; k < TRACE_ROWS_VARIANTS; k++)
      for (size_t t = 0; t < VERIFY_SUM_TERMS; t++) {
        const double *stored = t == 0
                                   ? v->stored_attn + k * plane + h * n
                                   : v->stored_obc + (k * TRACE_OBC_TERMS + t - 1) * plane + h * n;
        const double *captured =
            v->captured + ((h * TRACE_ROWS_VARIANTS + k) * VERIFY_SUM_TERMS + t) * n;
        /* obc_k and obc_vk carry dd = vv - 2 v.o + oo, which the capture
         * forms in float and which cancels where o_i nears v_p: a small term
         * has no relative accuracy to check (a random-weight model at 2048
         * tokens stores 3.5e-4 where the rows' terms in double sum to
         * 4.8e-4), so only attn and obc_v, sums of products of positive
         * factors, are compared. obc_v's float products of four factors
         * against these in double: ten times the tolerance (a SmolLM2
         * capture measured 1e-5 against 1e-4 for f32), relative to the
         * head's largest captured sum below 1e-6 of it. */
        if (t == 1 + TRACE_OBC_K || t == 1 + TRACE_OBC_VK) continue;
        double allowed = t == 0 ? tolerance : 10.0 * tolerance;
        double floor_value = 1e-30;
        for (size_t p = 0; t > 0 && p < n; p++) floor_value = fmax(floor_value, 1e-6 * captured[p]);
        for (size_t p = 0; p < n; p++) {
          double excess = captured[p] - stored[p]; /* > 0: the captured rows alone exceed the sum */
          double diff = v->complete[k] ? fabs(excess) : excess;
          double relative = diff / fmax(captured[p], floor_value);
          if (t == 0 && relative > v->worst) {
            v->worst = relative;
            v->worst_layer = layer, v->worst_head = h, v->worst_position = p;
          }
          if (diff > allowed * fmax(captured[p], floor_value))
            return obc_fail(OBC_EFORMAT,
                            "%s: /layers/%03zu/%s, rows %s, head %zu, position %zu: stored "
                            "%.9g, but the captured rows' terms %s %.9g (tolerance %g)",
                            path, layer, names[t], k == TRACE_ROWS_AGNOSTIC ? "agnostic" : "all", h,
                            p, stored[p], v->complete[k] ? "sum to" : "alone sum to", captured[p],
                            allowed);
        }
      }
  return OBC_OK;
}

/* ---- query statistics --------------------------------------------------------- */

/* Whether every covariance of the layer's query statistics is positive
 * semi-definite, by a Cholesky factorisation of C + tau I. The stored C =
 * outer/n - mean mean^T carries in each entry (a, b) a cancellation error of
 * at most eps sqrt(s_a s_b), s the second moments outer_aa / n and eps the
 * reader's QSTATS tolerance (1e-9, traces/trace_read.c), so the error
 * matrix E has ||E||_2 <= ||E||_F <= eps sum_a s_a: a true PSD matrix
 * stored with it has lambda_min(C) >= -eps tr(S), and C + tau I with tau =
 * 2 eps tr(S) is positive definite. Cholesky in double is backward stable
 * to ~d 2^-53 ||C|| (< 1e-13 ||C|| for d <= 512), far below tau, so a
 * pivot <= 0 means a matrix no set of queries has. The reader checks the
 * 2x2 minors at load; this is the whole matrix. */
static int check_query_psd(TraceReader *reader, size_t layer) {
  const TraceMeta *m = trace_meta(reader);
  size_t H = m->model.n_heads, d = m->model.head_dim;
  double *sum = trace_alloc(reader, H * d, sizeof *sum, "query sums");
  double *outer = sum ? trace_alloc(reader, H * d * d, sizeof *outer, "query outer") : NULL;
  double *c = outer ? trace_alloc(reader, d * d, sizeof *c, "a covariance") : NULL;
  int rc = c ? OBC_OK : OBC_ENOMEM;
  for (int v = 0; !rc && v < TRACE_ROWS_VARIANTS; v++) {
    int64_t count = 0;
    rc = trace_read_query_stats(reader, layer, (TraceSumRows)v, sum, outer, &count, NULL);
    for (size_t h = 0; !rc && count > 0 && h < H; h++) {
      const double *s = sum + h * d, *o = outer + h * d * d;
      double n = (double)count, trace_s = 0.0;
      for (size_t a = 0; a < d; a++) trace_s += o[a * d + a] / n;
      double tau = 2e-9 * trace_s + 1e-300;
      for (size_t a = 0; a < d; a++)
        for (size_t b = 0; b < d; b++)
          c[a * d + b] = o[a * d + b] / n - (s[a] / n) * (s[b] / n) + (a == b ? tau : 0.0);
      for (size_t j = 0; !rc && j < d; j++) { /* c = L L^T in place, L below the diagonal */
        double pivot = c[j * d + j];
        for (size_t k = 0; k < j; k++) pivot -= c[j * d + k] * c[j * d + k];
        if (!(pivot > 0.0)) {
          rc = obc_fail(OBC_EFORMAT,
                        "%s: /layers/%03zu/q_outer, rows %s, head %zu: the covariance is not "
                        "positive semi-definite (Cholesky pivot %zu is %.3g with slack %.3g)",
                        trace_path(reader), layer, v == TRACE_ROWS_AGNOSTIC ? "agnostic" : "all", h,
                        j, pivot - tau, tau);
          break;
        }
        double root = sqrt(pivot);
        c[j * d + j] = root;
        for (size_t i = j + 1; i < d; i++) {
          double x = c[i * d + j];
          for (size_t k = 0; k < j; k++) x -= c[i * d + k] * c[j * d + k];
          c[i * d + j] = x / root;
        }
      }
    }
  }
  free(sum), free(outer), free(c);
  return rc;
}

/* Layer by layer; the KV heads of a layer in parallel, each thread streaming
 * one KV head at a time, so memory stays at a few heads whatever the trace. */
static int verify_trace(TraceReader *reader, VerifyScratch *scratch, size_t n_threads,
                        VerifySums *sums, double tolerance) {
  const TraceModel *c = &trace_meta(reader)->model;
  for (size_t layer = 0; layer < c->n_layers; layer++) {
    if (sums) {
      int rc = sums_read_layer(reader, layer, sums);
      if (rc) return rc;
    }
    if (trace_meta(reader)->has_query_stats) { /* both variants' checks, and PSD */
      int rc = check_query_psd(reader, layer);
      if (rc) return rc;
    }
    int failed = OBC_OK;
    char message[1024] = "";
#pragma omp parallel for schedule(dynamic, 1) num_threads((int)n_threads)
    for (size_t g = 0; g < c->n_kv_heads; g++) {
      int stop;
#pragma omp atomic read
      stop = failed;
      if (stop) continue;
      int rc = verify_kv_head(reader, layer, g, &scratch[omp_get_thread_num()]);
      if (rc) {
#pragma omp critical(verify_failure)
        if (!message[0]) {
          snprintf(message, sizeof message, "%s", obc_error_message());
#pragma omp atomic write
          failed = rc;
        }
      }
    }
    if (failed) return obc_fail(failed, "%s", message);
    if (sums) {
      int rc = sums_check_layer(reader, layer, sums, tolerance);
      if (rc) return rc;
    }
  }
  return OBC_OK;
}

/* Reads every dataset as stored (Fletcher32 fails a damaged chunk, naming
 * it) and compares the recomputed content hash with the recorded one. */
static int verify_contents(TraceReader *reader, char computed[17]) {
  const TraceMeta *m = trace_meta(reader);
  int rc = trace_compute_hash(reader, computed);
  if (rc) return rc;
  if (m->content_hash[0] && strcmp(m->content_hash, computed))
    return obc_fail(OBC_EFORMAT,
                    "%s: content hash mismatch: recorded %s, the contents hash to %s (the file "
                    "was damaged or modified)",
                    trace_path(reader), m->content_hash, computed);
  return OBC_OK;
}

int trace_verify(TraceReader *reader, double tolerance, size_t threads, TraceVerifyReport *report) {
  const TraceMeta *m = trace_meta(reader);
  const char *path = trace_path(reader);
  memset(report, 0, sizeof *report);
  report->failing = -1;
  if (tolerance == 0.0)
    tolerance = strcmp(m->dtype, "f16") ? TRACE_VERIFY_TOLERANCE_F32 : TRACE_VERIFY_TOLERANCE_F16;
  report->tolerance = tolerance;
  size_t n_threads = threads ? threads : (size_t)omp_get_max_threads();
  if (n_threads > m->model.n_kv_heads) n_threads = m->model.n_kv_heads;
  int rc = OBC_OK;
  VerifyScratch *scratch = calloc(n_threads, sizeof *scratch);
  size_t allocated = 0;
  if (!scratch) rc = obc_fail(OBC_ENOMEM, "%s: out of memory", path);
  for (; !rc && allocated < n_threads; allocated++) rc = scratch_alloc(&scratch[allocated], reader);
  VerifySums sums = {0};
  bool has_sums = m->has_column_sums;
  if (!rc && has_sums) rc = sums_alloc(&sums, reader);
  for (size_t t = 0; !rc && has_sums && t < n_threads; t++)
    scratch[t].captured_sums = sums.captured, scratch[t].v_norms = sums.v_norms;
  if (!rc) rc = verify_trace(reader, scratch, n_threads, has_sums ? &sums : NULL, tolerance);
  if (!rc) {
    report->recomputed = true;
    for (int k = 0; k < TRACE_VERIFY_KINDS; k++) {
      if (k == TRACE_VERIFY_A && !m->has_attn) continue;
      TraceVerifyWorst w = scratch[0].worst[k];
      for (size_t t = 1; t < n_threads; t++)
        if (!(scratch[t].worst[k].worst <= w.worst)) w = scratch[t].worst[k];
      report->worst[k] = w;
      if (!(w.worst <= tolerance) && report->failing < 0) report->failing = k;
    }
    report->has_sums = has_sums;
    report->sums_complete = sums.complete[TRACE_ROWS_ALL];
    report->sums_worst = sums.worst;
    report->sums_layer = sums.worst_layer, report->sums_head = sums.worst_head;
    report->sums_position = sums.worst_position;
    if (report->failing >= 0) {
      const TraceVerifyWorst *w = &report->worst[report->failing];
      rc = obc_fail(OBC_EFORMAT,
                    "%s: stored %s differs from its recomputation from Q, K, V by %.3g at layer "
                    "%zu, head %zu, row %zu (tolerance %g)",
                    path, w->name, w->worst, w->layer, w->head, w->row, tolerance);
    }
  }
  if (!rc) rc = verify_contents(reader, report->content_hash);
  if (has_sums) sums_free(&sums);
  for (size_t t = 0; scratch && t < allocated; t++) scratch_free(&scratch[t]);
  free(scratch);
  return rc;
}
