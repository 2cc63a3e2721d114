/* Check suite of the CPU attention (runtime/cpu_attention.h), the tiled
 * online-softmax pass: on random Q/K/V over GQA groups, 1..300 queries, a
 * first position > 0, key counts that are no multiple of the key tile and
 * eviction marks (a fully dropped tile, a row whose only kept key is its own),
 * its outputs, lse and captured attention rows agree with a double-precision
 * softmax within a bound derived from the fp32 arithmetic, and so do those of
 * the reference path (cpu_attention_two_pass); dropped and future keys get
 * exactly 0; and one and two threads give identical bits. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "runtime/cpu_attention.h"

/* One problem: shape, inputs and the captured rows. */
typedef struct {
  CpuAttentionShape s;
  float *q, *k, *v;       /* (n, n_heads * d), (n_kv_heads, kv_stride, d) twice */
  unsigned char *evicted; /* (n_kv_heads, kv_stride) or NULL */
  int32_t *row_of;        /* (n) */
  size_t n_rows;
} Problem;

/* What one implementation returns. */
typedef struct {
  float *out;  /* (n, n_heads * d) */
  float *lse;  /* (n_heads, n) */
  float *attn; /* (n_heads, n_rows, pos0 + n) or NULL */
} Result;

static float next_uniform(uint64_t *state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(*state >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

enum { EVICT_NONE, EVICT_SOME };

/* Random inputs. Keys grow with their position, so that later tiles raise the
 * running max and the rescaling is exercised. EVICT_SOME drops about a third
 * of the cached keys [0, pos0) of KV head 0, all of [256, 512) there (a whole
 * key tile), and every cached key of the last KV head (its first query keeps
 * only itself). Captured rows: the first, 63, 64, the middle and the last. */
static void problem_make(Problem *p, size_t n_heads, size_t n_kv_heads, size_t pos0, size_t n,
                         int evict, uint64_t seed) {
  memset(p, 0, sizeof(*p));
  size_t d = 64, stride = pos0 + n + 5;
  p->s = (CpuAttentionShape){.n_heads = n_heads,
                             .n_kv_heads = n_kv_heads,
                             .head_dim = d,
                             .kv_stride = stride,
                             .pos0 = pos0,
                             .n = n};
  p->q = malloc(n * n_heads * d * sizeof(float));
  p->k = malloc(n_kv_heads * stride * d * sizeof(float));
  p->v = malloc(n_kv_heads * stride * d * sizeof(float));
  p->row_of = malloc(n * sizeof(int32_t));
  ck_assert(p->q && p->k && p->v && p->row_of);
  for (size_t i = 0; i < n * n_heads * d; i++) p->q[i] = 2.0f * next_uniform(&seed);
  for (size_t g = 0; g < n_kv_heads; g++)
    for (size_t t = 0; t < stride; t++)
      for (size_t i = 0; i < d; i++) {
        size_t at = (g * stride + t) * d + i;
        p->k[at] = (1.0f + (float)t / 128.0f) * next_uniform(&seed);
        p->v[at] = next_uniform(&seed);
      }
  if (evict == EVICT_SOME) {
    p->evicted = calloc(n_kv_heads * stride, 1);
    ck_assert_ptr_nonnull(p->evicted);
    for (size_t t = 0; t < pos0; t++) {
      p->evicted[t] = (next_uniform(&seed) < -0.33f) || (t >= 256 && t < 512);
      p->evicted[(n_kv_heads - 1) * stride + t] = 1;
    }
    p->s.evicted = p->evicted;
  }
  size_t picks[] = {0, 63, 64, n / 2, n - 1};
  for (size_t t = 0; t < n; t++) p->row_of[t] = -1;
  for (size_t i = 0; i < sizeof picks / sizeof picks[0]; i++)
    if (picks[i] < n) p->row_of[picks[i]] = 0; /* numbered below, ascending */
  for (size_t t = 0; t < n; t++)
    if (p->row_of[t] == 0) p->row_of[t] = (int32_t)p->n_rows++;
}

static void problem_free(Problem *p) {
  free(p->q);
  free(p->k);
  free(p->v);
  free(p->evicted);
  free(p->row_of);
}

static void result_alloc(const Problem *p, Result *r) {
  size_t n = p->s.n, keys = p->s.pos0 + n, q_dim = p->s.n_heads * p->s.head_dim;
  r->out = malloc(n * q_dim * sizeof(float));
  r->lse = malloc(p->s.n_heads * n * sizeof(float));
  r->attn = malloc(p->s.n_heads * p->n_rows * keys * sizeof(float));
  ck_assert(r->out && r->lse && r->attn);
  /* NaN everywhere first: an entry left unwritten fails every comparison */
  for (size_t i = 0; i < n * q_dim; i++) r->out[i] = NAN;
  for (size_t i = 0; i < p->s.n_heads * p->n_rows * keys; i++) r->attn[i] = NAN;
}

static void result_free(Result *r) {
  free(r->out);
  free(r->lse);
  free(r->attn);
}

/* The implementation under test, on `threads` OpenMP threads; with_rows = 0
 * passes rows == NULL (attn stays untouched). */
static void run_fused(const Problem *p, int threads, int with_rows, Result *r) {
  result_alloc(p, r);
  CpuAttentionRows rows = {p->row_of, p->n_rows, r->attn};
  double gemm = 0.0;
  int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  ck_assert_int_eq(
      cpu_attention(&p->s, p->q, p->k, p->v, r->out, r->lse, with_rows ? &rows : NULL, &gemm), 0);
  omp_set_num_threads(saved);
}

/* The reference path: the former two-pass implementation. */
static void run_two_pass(const Problem *p, Result *r) {
  result_alloc(p, r);
  CpuAttentionRows rows = {p->row_of, p->n_rows, r->attn};
  double gemm = 0.0;
  ck_assert_int_eq(cpu_attention_two_pass(&p->s, p->q, p->k, p->v, r->out, r->lse, &rows, &gemm),
                   0);
}

/* Worst |error| / bound of r against a double-precision softmax, over out,
 * lse and the captured rows; asserts the exact zeros (dropped keys, keys
 * after a row's own position). with_attn = 0 skips the captured rows.
 *
 * The bound, per row, from the fp32 arithmetic (u = 2^-24, first order):
 * - a logit z_p = scale * q . k_p from a d-term fp32 dot product and one
 *   scaling: |dz_p| <= (d + 1) u scale sum_i |q_i k_pi|; the largest over the
 *   row's keys is dz;
 * - p_p = exp(z_p - m) for the fp32 max m, which cancels in the ratio: the
 *   subtraction rounds by u |z_p - m| <= 2 u Z (Z = max |z_p|) and cpu_expf
 *   is within e = 2^-22 relative (about 1e-7, runtime/cpu_ops.h); each of at
 *   most `tiles` rescalings by alpha = exp(m_old - m_new) adds e + 2 u Z + u;
 *   so every p_p is within delta = dz + (tiles + 1)(e + 2 u Z + u) relative;
 * - o = sum_p p_p v_p / sum_p p_p: relative errors delta in the p_p move it by
 *   at most 2 delta sum_p A_p |v_p|; the fp32 sums of at most K = n_keys terms
 *   (numerator and denominator) add 2 K u sum_p A_p |v_p|, the division u |o|;
 * - lse = m + log(l): |dlse| <= delta + K u + 2 u |lse|;
 * - a captured A_p = exp(z_p - m) / l: relative 2 delta + (K + 2) u. */
static double compare_reference(const Problem *p, const Result *r, int with_attn) {
  const CpuAttentionShape *s = &p->s;
  size_t d = s->head_dim, q_dim = s->n_heads * d, group = s->n_heads / s->n_kv_heads;
  size_t keys = s->pos0 + s->n;
  const double u = ldexp(1.0, -24), e = ldexp(1.0, -22), scale = 1.0 / sqrt((double)d);
  double *z = malloc(keys * sizeof(double)), *a = malloc(keys * sizeof(double));
  ck_assert(z && a);
  double worst = 0.0;
  for (size_t h = 0; h < s->n_heads; h++)
    for (size_t t = 0; t < s->n; t++) {
      size_t g = h / group, own = s->pos0 + t, tiles = own / 64 + 2;
      const unsigned char *ev = s->evicted ? s->evicted + g * s->kv_stride : NULL;
      const float *qt = p->q + t * q_dim + h * d;
      double m = -INFINITY, l = 0.0, dz = 0.0, big_z = 0.0;
      for (size_t j = 0; j <= own; j++) {
        if (ev && ev[j]) continue;
        const float *kj = p->k + (g * s->kv_stride + j) * d;
        double dot = 0.0, mag = 0.0;
        for (size_t i = 0; i < d; i++)
          dot += (double)qt[i] * kj[i], mag += fabs((double)qt[i] * kj[i]);
        z[j] = dot * scale;
        m = fmax(m, z[j]);
        dz = fmax(dz, (double)(d + 1) * u * scale * mag);
        big_z = fmax(big_z, fabs(z[j]));
      }
      for (size_t j = 0; j <= own; j++) l += a[j] = ev && ev[j] ? 0.0 : exp(z[j] - m);
      for (size_t j = 0; j <= own; j++) a[j] /= l;
      double delta = dz + (double)(tiles + 1) * (e + 2 * u * big_z + u);
      double lse = m + log(l);
      double lse_bound = delta + (double)(own + 1) * u + 2 * u * fabs(lse);
      worst = fmax(worst, fabs(r->lse[h * s->n + t] - lse) / lse_bound);
      for (size_t i = 0; i < d; i++) {
        double o = 0.0, mass = 0.0;
        for (size_t j = 0; j <= own; j++) {
          const double vj = p->v[(g * s->kv_stride + j) * d + i];
          o += a[j] * vj, mass += a[j] * fabs(vj);
        }
        double bound = (2 * delta + 2.0 * (double)(own + 1) * u) * mass + u * fabs(o) + 1e-30;
        double got = r->out[t * q_dim + h * d + i];
        worst = fmax(worst, isnan(got) ? INFINITY : fabs(got - o) / bound);
      }
      if (!with_attn || p->row_of[t] < 0) continue;
      const float *row = r->attn + (h * p->n_rows + (size_t)p->row_of[t]) * keys;
      for (size_t j = 0; j < keys; j++) {
        if (j > own || (ev && ev[j])) {
          ck_assert_msg(row[j] == 0.0f, "head %zu row %zu key %zu: %g, not 0", h, t, j, row[j]);
          continue;
        }
        double bound = a[j] * (2 * delta + (double)(own + 3) * u) + 1e-30;
        worst = fmax(worst, isnan(row[j]) ? INFINITY : fabs(row[j] - a[j]) / bound);
      }
    }
  free(z);
  free(a);
  return worst;
}

/* Both implementations against the reference, and 1 vs 2 threads bit-equal. */
static void check_problem(size_t n_heads, size_t n_kv_heads, size_t pos0, size_t n, int evict) {
  Problem p;
  problem_make(&p, n_heads, n_kv_heads, pos0, n, evict, 1000 + pos0 * 7 + n);
  Result fused, fused2, bare, old;
  run_fused(&p, 1, 1, &fused);
  run_fused(&p, 2, 1, &fused2);
  run_fused(&p, 1, 0, &bare);
  run_two_pass(&p, &old);
  double err = compare_reference(&p, &fused, 1), err_old = compare_reference(&p, &old, 1);
  printf("heads %zu/%zu pos0 %4zu n %3zu evict %d: worst error / bound %.3f (two-pass %.3f)\n",
         n_heads, n_kv_heads, pos0, n, evict, err, err_old);
  ck_assert_double_le(err, 1.0);
  ck_assert_double_le(err_old, 1.0);
  size_t out_size = n * n_heads * p.s.head_dim * sizeof(float);
  size_t attn_size = n_heads * p.n_rows * (pos0 + n) * sizeof(float);
  ck_assert_msg(!memcmp(fused.out, fused2.out, out_size), "out differs between 1 and 2 threads");
  ck_assert_msg(!memcmp(fused.lse, fused2.lse, n_heads * n * sizeof(float)), "lse differs");
  ck_assert_msg(!memcmp(fused.attn, fused2.attn, attn_size), "attn differs");
  /* capture changes nothing else */
  ck_assert_msg(!memcmp(fused.out, bare.out, out_size), "out differs with rows == NULL");
  ck_assert_msg(!memcmp(fused.lse, bare.lse, n_heads * n * sizeof(float)), "lse differs");
  result_free(&fused);
  result_free(&fused2);
  result_free(&bare);
  result_free(&old);
  problem_free(&p);
}

START_TEST(test_prefill_from_zero) {
  size_t counts[] = {1, 63, 64, 65, 300};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    check_problem(4, 2, 0, counts[i], EVICT_NONE);
}
END_TEST

START_TEST(test_chunk_after_cached_keys) {
  check_problem(9, 3, 517, 65, EVICT_NONE);   /* SmolLM2's 9/3 heads, 582 keys */
  check_problem(6, 6, 200, 63, EVICT_NONE);   /* no grouping */
  check_problem(8, 1, 1000, 1, EVICT_NONE);   /* a decode step: one tile of 1001 keys */
  check_problem(10, 2, 300, 100, EVICT_SOME); /* groups of 5: stacks of 4 and 1 heads */
}
END_TEST

START_TEST(test_evicted_keys_get_exactly_zero) {
  check_problem(4, 2, 600, 70, EVICT_SOME);
  check_problem(4, 2, 300, 1, EVICT_SOME); /* decode over kept keys */
  check_problem(3, 3, 5, 64, EVICT_SOME);
}
END_TEST

static Suite *attention_suite(void) {
  Suite *s = suite_create("attention");
  TCase *tc = tcase_create("cpu");
  tcase_add_test(tc, test_prefill_from_zero);
  tcase_add_test(tc, test_chunk_after_cached_keys);
  tcase_add_test(tc, test_evicted_keys_get_exactly_zero);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  SRunner *runner = srunner_create(attention_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
