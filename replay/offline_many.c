/* Offline replay of many kept sets at once (replay/offline.h,
 * replay_offline_run_many; docs/SCIENCE.md, "Offline replay of many sets"):
 * each (layer, KV head) is read once, its decode rows' logits and
 * probabilities e_p = exp(z_p - lse) are computed once with GEMMs, and each
 * set then only sums e_p and e_p v_p over its evicted or its kept prompt
 * positions, whichever list is shorter, as one GEMM over all the rows. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "replay/offline.h"
#include "scores/score_head.h"

/* The shared part of one block of decode rows of a (layer, KV head): of its
 * group * T rows (row r = j * T + t for query head j and decode step t),
 * rows r0 .. r0 + R - 1, at most cap (local index i = r - r0). */
typedef struct {
  size_t R, r0, cap, T, n_pos, s, d, first;
  double *Z;      /* (R, n_pos) logits z_p */
  double *E;      /* (R, n_pos) e_p = exp(z_p - lse); 0 past the row's live keys */
  double *P;      /* (R, d) sum_{p < s} e_p v_p */
  double *Gen;    /* (R, d) sum_{s <= p < live} e_p v_p */
  double *mass_p; /* (R) sum_{p < s} e_p */
  double *mass_g; /* (R) sum_{s <= p < live} e_p */
  size_t *live;   /* (R) keys a row sees: position + 1 */
} ManyRows;

/* One thread's scratch for the sets it takes. */
typedef struct {
  size_t *kept, *evicted; /* (s) prompt positions */
  double *Ec;             /* (R, s) gathered e_p of the summed list */
  double *Vc;             /* (s, d) gathered v_p */
  double *X;              /* (R, d) sum over the list of e_p v_p */
  double *mc;             /* (R) sum over the list of e_p */
  double *o_new;          /* (d) */
} ManyScratch;

/* Below this kept mass the kept-set sum is recomputed relative to the kept
 * maximum (as oracle_set_eviction_output does): above it, every e_p that
 * underflows (< 2^-1074, z_p - lse < -745) weighs less than e^-200 relative
 * to the kept mass, far below double rounding. */
#define MANY_KEPT_MASS_MIN 1e-217 /* ~ e^-500 */

/* Bytes of the shared rows (Z and E) and of one thread's gathered weights
 * (Ec) per block, which bound the rows of a block. It depends on the trace
 * only, so the blocks (and every GEMM's shape) are the same for any thread
 * count. */
#define MANY_BLOCK_BYTES ((size_t)96 << 20)

static void many_rows_free(ManyRows *m) {
  free(m->Z);
  free(m->E);
  free(m->P);
  free(m->Gen);
  free(m->mass_p);
  free(m->mass_g);
  free(m->live);
  memset(m, 0, sizeof *m);
}

static int many_rows_alloc(ManyRows *m, const TraceMeta *meta, size_t T, size_t first,
                           size_t max_rows) {
  memset(m, 0, sizeof *m);
  size_t group = meta->model.n_heads / meta->model.n_kv_heads;
  m->T = T;
  m->cap = MANY_BLOCK_BYTES / (3 * meta->n_positions * sizeof(double));
  if (max_rows) m->cap = max_rows;
  m->cap = m->cap < 1 ? 1 : m->cap > group * T ? group * T : m->cap;
  m->n_pos = meta->n_positions;
  m->s = meta->n_prompt;
  m->d = meta->model.head_dim;
  m->first = first;
  m->Z = obc_malloc(m->cap * m->n_pos * sizeof(double), "decode logits");
  m->E = obc_malloc(m->cap * m->n_pos * sizeof(double), "decode probabilities");
  m->P = obc_malloc(m->cap * m->d * sizeof(double), "prompt sums");
  m->Gen = obc_malloc(m->cap * m->d * sizeof(double), "generated sums");
  m->mass_p = obc_malloc(m->cap * sizeof(double), "prompt mass");
  m->mass_g = obc_malloc(m->cap * sizeof(double), "generated mass");
  m->live = obc_malloc(m->cap * sizeof(size_t), "live keys");
  if (m->Z && m->E && m->P && m->Gen && m->mass_p && m->mass_g && m->live) return OBC_OK;
  many_rows_free(m);
  return OBC_ENOMEM;
}

/* Logits, probabilities and the per-row sums of query head j's steps
 * t0 .. t1 - 1 (rows of the current block). */
static void many_rows_head(ManyRows *m, const OracleHead *h, size_t j, size_t t0, size_t t1) {
  size_t nt = t1 - t0, n = m->n_pos, d = m->d, s = m->s, i0 = j * m->T + t0 - m->r0;
  double *Z = m->Z + i0 * n, *E = m->E + i0 * n;
  const double *Q = h->Q + (j * h->n_rows + m->first + t0) * d;
  /* (nt, n) = scale * Q_j (nt, d) K^T (d, n) */
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nt, (int)n, (int)d, h->attn_scale, Q,
              (int)d, h->K, (int)d, 0.0, Z, (int)n);
  for (size_t t = 0; t < nt; t++) {
    size_t i = i0 + t, row = m->first + t0 + t;
    size_t live = (size_t)h->row_positions[row] + 1;
    m->live[i] = live = live > n ? n : live;
    double lse = h->lse[j * h->n_rows + row], mp = 0.0, mg = 0.0;
    for (size_t p = 0; p < n; p++) E[t * n + p] = p < live ? exp(Z[t * n + p] - lse) : 0.0;
    for (size_t p = 0; p < s; p++) mp += E[t * n + p];
    for (size_t p = s; p < live; p++) mg += E[t * n + p];
    m->mass_p[i] = mp;
    m->mass_g[i] = mg;
  }
  /* (nt, d) = E[:, :s] V[:s]  and  E[:, s:] V[s:] */
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nt, (int)d, (int)s, 1.0, E, (int)n,
              h->V, (int)d, 0.0, m->P + i0 * d, (int)d);
  if (n > s)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nt, (int)d, (int)(n - s), 1.0,
                E + s, (int)n, h->V + s * d, (int)d, 0.0, m->Gen + i0 * d, (int)d);
  else
    memset(m->Gen + i0 * d, 0, nt * d * sizeof(double));
}

static void many_scratch_free(ManyScratch *w) {
  free(w->kept);
  free(w->evicted);
  free(w->Ec);
  free(w->Vc);
  free(w->X);
  free(w->mc);
  free(w->o_new);
  memset(w, 0, sizeof *w);
}

static int many_scratch_alloc(ManyScratch *w, const ManyRows *m) {
  memset(w, 0, sizeof *w);
  size_t s = m->s ? m->s : 1;
  w->kept = malloc(s * sizeof(size_t));
  w->evicted = malloc(s * sizeof(size_t));
  w->Ec = malloc(m->cap * s * sizeof(double));
  w->Vc = malloc(s * m->d * sizeof(double));
  w->X = malloc(m->cap * m->d * sizeof(double));
  w->mc = malloc(m->cap * sizeof(double));
  w->o_new = malloc(m->d * sizeof(double));
  if (w->kept && w->evicted && w->Ec && w->Vc && w->X && w->mc && w->o_new) return OBC_OK;
  many_scratch_free(w);
  return OBC_ENOMEM;
}

/* Row r's o' when the evicted mass exceeds 1/2 and the shared sums cannot
 * give it (the kept mass is tiny, or the evicted list was the one summed):
 * oracle_set_eviction_output's renormalisation over the kept keys, from the
 * stored logits. */
static void many_kept_direct(const ManyRows *m, const OracleHead *h, const unsigned char *mask,
                             size_t r, double *o_new) {
  size_t n = m->n_pos, d = m->d, live = m->live[r];
  const double *z = m->Z + r * n;
  double kept_max = -HUGE_VAL, total = 0.0;
  for (size_t p = 0; p < live; p++)
    if (p >= m->s || mask[p]) kept_max = z[p] > kept_max ? z[p] : kept_max;
  memset(o_new, 0, d * sizeof *o_new);
  for (size_t p = 0; p < live; p++) {
    if (p < m->s && !mask[p]) continue;
    double w = exp(z[p] - kept_max);
    total += w;
    for (size_t c = 0; c < d; c++) o_new[c] += w * h->V[p * d + c];
  }
  for (size_t c = 0; c < d; c++) o_new[c] /= total;
}

/* The kept keys of row r (the prompt's kept ones and the generated ones it sees). */
static size_t many_kept_keys(const ManyRows *m, const unsigned char *mask, size_t n_kept,
                             size_t r) {
  size_t live = m->live[r];
  if (live >= m->s) return n_kept + (live - m->s);
  size_t k = 0;
  for (size_t p = 0; p < live; p++) k += mask[p];
  return k;
}

/* Row r's o' into w->o_new from the set's sum X over its shorter list
 * (use_kept: the kept prompt keys, n_k of them); returns the evicted mass. */
static double many_row_output(const ManyRows *m, const OracleHead *h, const unsigned char *mask,
                              ManyScratch *w, bool use_kept, size_t n_k, size_t r,
                              const double *o) {
  size_t d = m->d;
  const double *X = w->X + r * d, *P = m->P + r * d, *Gen = m->Gen + r * d;
  double *o_new = w->o_new;
  double lost = use_kept ? m->mass_p[r] - w->mc[r] : w->mc[r];
  lost = lost < 0.0 ? 0.0 : lost; /* rounding of the difference */
  double kept_mass = use_kept ? w->mc[r] + m->mass_g[r] : 0.0;
  if (many_kept_keys(m, mask, n_k, r) == 0) {
    memset(o_new, 0, d * sizeof *o_new);
    return 1.0;
  }
  if (lost <= 0.5) { /* o' = (o - sum_E e_p v_p) / (1 - mass) */
    for (size_t c = 0; c < d; c++)
      o_new[c] = (o[c] - (use_kept ? P[c] - X[c] : X[c])) / (1.0 - lost);
  } else if (use_kept && kept_mass >= MANY_KEPT_MASS_MIN) { /* over the kept keys */
    for (size_t c = 0; c < d; c++) o_new[c] = (X[c] + Gen[c]) / kept_mass;
  } else {
    many_kept_direct(m, h, mask, r, o_new);
  }
  return lost;
}

/* One set on the current block of rows of (l, g): gathers the shorter of
 * its kept and evicted prompt lists, sums over it with one GEMM, and writes
 * every row's results as replay_offline_run does (sq_error adds the group's
 * query heads in order, as there). */
static void many_set_head(const ManyRows *m, const OracleHead *h, const unsigned char *mask,
                          ManyScratch *w, size_t l, size_t g, ReplayOfflineResult *out) {
  size_t s = m->s, d = m->d, n = m->n_pos, R = m->R, T = m->T, H = out->n_heads;
  size_t G = out->n_kv_heads, group = H / G, n_k = 0, n_e = 0;
  for (size_t p = 0; p < s; p++) {
    if (mask[p])
      w->kept[n_k++] = p;
    else
      w->evicted[n_e++] = p;
  }
  bool use_kept = n_k <= n_e;
  const size_t *list = use_kept ? w->kept : w->evicted;
  size_t nc = use_kept ? n_k : n_e;
  for (size_t r = 0; r < R; r++) {
    double sum = 0.0;
    for (size_t i = 0; i < nc; i++) sum += w->Ec[r * nc + i] = m->E[r * n + list[i]];
    w->mc[r] = sum;
  }
  for (size_t i = 0; i < nc; i++) memcpy(w->Vc + i * d, h->V + list[i] * d, d * sizeof(double));
  if (nc) /* (R, d) = Ec (R, nc) Vc (nc, d) */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)d, (int)nc, 1.0, w->Ec,
                (int)nc, w->Vc, (int)d, 0.0, w->X, (int)d);
  else
    memset(w->X, 0, R * d * sizeof(double));
  double *o_new = w->o_new;
  for (size_t r = 0; r < R; r++) {
    size_t j = (m->r0 + r) / T, t = (m->r0 + r) % T, head = g * group + j;
    const double *o = h->O + (j * h->n_rows + m->first + t) * d;
    double lost = many_row_output(m, h, mask, w, use_kept, n_k, r, o);
    replay_offline_record(out, l, g, head, t, o_new, o, d, lost);
  }
}

/* Needle share kept of every set for (l, g) (replay_offline_needle). */
static void many_needle(const TraceMeta *meta, const EvictKeepSet *keeps, size_t n, size_t l,
                        size_t g, ReplayOfflineResult *outs) {
  size_t s = meta->n_prompt, G = meta->model.n_kv_heads;
  for (size_t k = 0; k < n; k++)
    replay_offline_needle(&outs[k], meta, keeps[k].keep + (l * G + g) * s, l, g);
}

/* The shared rows of (l, g) block by block, then every set on them; query
 * heads and sets split over the threads, each set's numbers from one thread
 * in a fixed order, so the same for any thread count. */
static int many_head(const TraceMeta *meta, const OracleHead *h, ManyRows *m,
                     const EvictKeepSet *keeps, size_t n, size_t l, size_t g,
                     ReplayOfflineResult *outs) {
  size_t group = meta->model.n_heads / meta->model.n_kv_heads, s = meta->n_prompt;
  size_t G = meta->model.n_kv_heads, T = m->T, rows = group * T;
  int failed = 0;
#pragma omp parallel
  {
    ManyScratch w;
    int rc = many_scratch_alloc(&w, m);
    if (rc) {
#pragma omp atomic write
      failed = 1;
    }
    for (size_t r0 = 0; r0 < rows; r0 += m->cap) {
      size_t r1 = r0 + m->cap < rows ? r0 + m->cap : rows;
#pragma omp single
      {
        m->r0 = r0;
        m->R = r1 - r0;
      }
#pragma omp for schedule(static)
      for (size_t j = r0 / T; j <= (r1 - 1) / T; j++)
        many_rows_head(m, h, j, j * T > r0 ? 0 : r0 - j * T, (j + 1) * T < r1 ? T : r1 - j * T);
#pragma omp for schedule(dynamic, 1)
      for (size_t k = 0; k < n; k++)
        if (!rc) many_set_head(m, h, keeps[k].keep + (l * G + g) * s, &w, l, g, &outs[k]);
    }
    many_scratch_free(&w);
  }
  if (failed) return obc_fail(OBC_ENOMEM, "offline replay: out of memory for the set sums");
  many_needle(meta, keeps, n, l, g, outs);
  return OBC_OK;
}

int replay_offline_run_many(TraceReader *reader, const EvictKeepSet *keeps, size_t n,
                            ReplayOfflineResult *outs) {
  return replay_offline_run_many_rows(reader, keeps, n, 0, outs);
}

int replay_offline_run_many_rows(TraceReader *reader, const EvictKeepSet *keeps, size_t n,
                                 size_t max_rows, ReplayOfflineResult *outs) {
  const TraceMeta *meta = trace_meta(reader);
  for (size_t k = 0; k < n; k++) memset(&outs[k], 0, sizeof outs[k]);
  size_t first = 0, T = trace_meta_decode_rows(meta, &first);
  if (T == 0)
    return obc_fail(OBC_EINVAL,
                    "%s: no decode rows captured (offline replay needs them; hint: "
                    "capture with --decode >= 1)",
                    trace_path(reader));
  size_t L = meta->model.n_layers, G = meta->model.n_kv_heads;
  int rc = OBC_OK;
  for (size_t k = 0; k < n && !rc; k++) {
    const EvictKeepSet *keep = &keeps[k];
    if (keep->n_layers != L || keep->n_kv_heads != G || keep->n_prompt != meta->n_prompt)
      rc = obc_fail(OBC_EINVAL, "%s: kept set %zu has another shape than the trace",
                    trace_path(reader), k);
    if (!rc) rc = replay_offline_result_alloc(&outs[k], meta, T);
  }
  ScoreHead h;
  ManyRows m;
  memset(&h, 0, sizeof h);
  memset(&m, 0, sizeof m);
  if (!rc) rc = score_head_alloc(&h, reader);
  if (!rc) rc = many_rows_alloc(&m, meta, T, first, max_rows);
  for (size_t l = 0; l < L && !rc; l++)
    for (size_t g = 0; g < G && !rc; g++) {
      rc = score_head_read(&h, reader, l, g);
      if (!rc) rc = many_head(meta, &h.data, &m, keeps, n, l, g, outs);
    }
  many_rows_free(&m);
  score_head_free(&h);
  if (rc)
    for (size_t k = 0; k < n; k++) replay_offline_result_free(&outs[k]);
  return rc;
}
