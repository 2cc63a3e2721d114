/* Offline replay of many kept sets at once (replay_offline_run_many) against
 * the one-set reference path (replay_offline_run) on a synthetic trace: all
 * kept, none kept, random sets of several densities, a policy's set, and sets
 * that evict more than half the mass (both with few and with many evicted
 * keys); the same numbers for 1 and 3 threads. */
#define _GNU_SOURCE /* qsort_r */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_startup.h"
#include "replay/offline.h"
#include "evict/policy.h"
#include "scores/score_head.h"
#include "traces/synth.h"
#include "tests/test_env.h"

enum { N_SETS = 9 };

/* Largest magnitudes of a trace's decode rows, for the tolerance. */
typedef struct {
  double B;       /* max attn_scale * sum_c |q_c k_c| */
  double zmax;    /* max |z_p| */
  double lse;     /* max |lse| */
  double v;       /* max |v_pc| */
  double o;       /* max |o_c| */
  double S;       /* max over rows of sum_p e_p */
  double *o_norm; /* (n_layers, n_heads, T) ||o|| of every decode row */
} Bounds;

static void tmp_path(char *out, size_t size, const char *name) {
  test_scratch_file(name, out, size);
}

static uint64_t next_random(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* Row (j, row)'s probabilities e_p (live keys) into e; returns the live count. */
static size_t row_probs(const ScoreHead *h, const TraceMeta *meta, size_t j, size_t row, double *e,
                        Bounds *b) {
  size_t d = meta->model.head_dim, live = (size_t)meta->row_positions[row] + 1;
  const double *q = h->Q + (j * meta->n_rows + row) * d;
  double lse = h->lse[j * meta->n_rows + row], sum = 0.0;
  for (size_t p = 0; p < live; p++) {
    double z = 0.0, a = 0.0;
    for (size_t c = 0; c < d; c++) z += q[c] * h->K[p * d + c], a += fabs(q[c] * h->K[p * d + c]);
    z *= meta->model.attn_scale;
    e[p] = exp(z - lse);
    sum += e[p];
    if (b) {
      b->B = fmax(b->B, meta->model.attn_scale * a);
      b->zmax = fmax(b->zmax, fabs(z));
    }
  }
  if (b) {
    b->lse = fmax(b->lse, fabs(lse));
    b->S = fmax(b->S, sum);
    for (size_t c = 0; c < d; c++) b->o = fmax(b->o, fabs(h->O[(j * meta->n_rows + row) * d + c]));
  }
  return live;
}

static int by_weight_desc(const void *a, const void *b, void *w) {
  const double *e = w;
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return e[x] < e[y] ? 1 : e[x] > e[y] ? -1 : (x > y) - (x < y);
}

/* Set k's masks: 0 all kept, 1 none kept, 2..5 random with keep share 2%,
 * 20%, 50%, 90%, 6 the policy's set as made, 7 per (layer, KV head) the
 * heaviest keys of query head 0's first decode row evicted until more than
 * 0.6 of its mass is gone (a few keys: the evicted list is the shorter one),
 * 8 the same but the lightest keys kept until less than 0.4 remains. */
static void make_masks(EvictKeepSet *sets, TraceReader *reader, ScoreHead *h, Bounds *b) {
  const TraceMeta *meta = trace_meta(reader);
  size_t L = meta->model.n_layers, G = meta->model.n_kv_heads, s = meta->n_prompt;
  size_t group = meta->model.n_heads / G, first = 0, T = trace_meta_decode_rows(meta, &first);
  static const double share[] = {0.02, 0.2, 0.5, 0.9};
  uint64_t x = 0x9e3779b97f4a7c15u;
  double *e = malloc(meta->n_positions * sizeof *e);
  size_t *order = malloc(s * sizeof *order);
  for (size_t lg = 0; lg < L * G; lg++) {
    ck_assert_int_eq(score_head_read(h, reader, lg / G, lg % G), 0);
    for (size_t j = 0; j < group; j++)
      for (size_t t = 0; t < T; t++) {
        row_probs(h, meta, j, first + t, e, b);
        const double *o = h->O + (j * meta->n_rows + first + t) * meta->model.head_dim;
        double norm = 0.0;
        for (size_t c = 0; c < meta->model.head_dim; c++) norm += o[c] * o[c];
        b->o_norm[((lg / G) * meta->model.n_heads + (lg % G) * group + j) * T + t] = sqrt(norm);
      }
    for (size_t i = 0; i < meta->n_positions * meta->model.head_dim; i++)
      b->v = fmax(b->v, fabs(h->V[i]));
    memset(sets[0].keep + lg * s, 1, s);
    memset(sets[1].keep + lg * s, 0, s);
    for (size_t k = 0; k < 4; k++)
      for (size_t p = 0; p < s; p++)
        sets[2 + k].keep[lg * s + p] = (next_random(&x) >> 11) * 0x1p-53 < share[k];
    row_probs(h, meta, 0, first, e, NULL);
    for (size_t p = 0; p < s; p++) order[p] = p;
    qsort_r(order, s, sizeof *order, by_weight_desc, e);
    double gone = 0.0;
    memset(sets[7].keep + lg * s, 1, s);
    for (size_t i = 0; i < s && gone <= 0.6; i++) {
      sets[7].keep[lg * s + order[i]] = 0;
      gone += e[order[i]];
    }
    double left = 0.0;
    memset(sets[8].keep + lg * s, 0, s);
    for (size_t i = s; i-- > 0 && left + e[order[i]] < 0.4;) {
      sets[8].keep[lg * s + order[i]] = 1;
      left += e[order[i]];
    }
  }
  free(e);
  free(order);
}

static void run_many(TraceReader *reader, const EvictKeepSet *sets, int threads, size_t max_rows,
                     ReplayOfflineResult *out) {
  int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  ck_assert_int_eq(replay_offline_run_many_rows(reader, sets, N_SETS, max_rows, out), 0);
  omp_set_num_threads(saved);
}

static void same_numbers(const ReplayOfflineResult *a, const ReplayOfflineResult *b) {
  size_t n = a->n_layers * a->n_heads * a->n_steps, m = a->n_layers * a->n_kv_heads;
  ck_assert(!memcmp(a->rel_error, b->rel_error, n * sizeof(double)));
  ck_assert(!memcmp(a->mass_lost, b->mass_lost, n * sizeof(double)));
  ck_assert(!memcmp(a->sq_error, b->sq_error, m * a->n_steps * sizeof(double)));
  ck_assert(!memcmp(a->needle_kept, b->needle_kept, m * sizeof(double)));
}

START_TEST(test_many_sets_equal_the_one_set_path) {
  char trace[4096];
  tmp_path(trace, sizeof trace, "offline_many.h5");
  SynthOptions o;
  synth_options_default(&o);
  o.n_decode = 5;
  o.seed = 17;
  ck_assert_int_eq(synth_generate(&o, trace), 0);
  TraceReader *reader = NULL;
  ck_assert_int_eq(trace_open(trace, &reader), 0);
  const TraceMeta *meta = trace_meta(reader);
  EvictKeepSet sets[N_SETS];
  for (size_t k = 0; k < N_SETS; k++) {
    EvictPolicy p;
    evict_policy_default(&p);
    ck_assert_int_eq(evict_policy_set_score(&p, "obc_vk"), 0);
    ck_assert_int_eq(evict_policy_set_budget(&p, "25%"), 0);
    ck_assert_int_eq(evict_policy_apply(reader, &p, &sets[k]), 0);
  }
  ScoreHead h;
  ck_assert_int_eq(score_head_alloc(&h, reader), 0);
  size_t first = 0;
  Bounds b = {0};
  b.o_norm = malloc(meta->model.n_layers * meta->model.n_heads *
                    trace_meta_decode_rows(meta, &first) * sizeof(double));
  make_masks(sets, reader, &h, &b);
  score_head_free(&h);

  /* The default blocks (all rows of a head at once) on 1 and 3 threads, and
   * blocks of 4 rows (T = 5: blocks straddle query heads) on 2. */
  ReplayOfflineResult ref[N_SETS], one[N_SETS], three[N_SETS], small[N_SETS];
  for (size_t k = 0; k < N_SETS; k++)
    ck_assert_int_eq(replay_offline_run(reader, &sets[k], &ref[k]), 0);
  run_many(reader, sets, 1, 0, one);
  run_many(reader, sets, 3, 0, three);
  run_many(reader, sets, 2, 4, small);

  /* Tolerance (u = 2^-53, gamma_k = k u / (1 - k u), n keys, d = head_dim).
   * Logits: both paths are d-term dot products (one a GEMM), each within
   * gamma_d B of the exact one. A weight e_p = exp(z_p - lse) (or the
   * reference's exp(z_p - kept_max), the same up to the factor the
   * normalisation removes) then differs between the paths by the relative
   * amount delta = 2 gamma_d B + 2 u (2 zmax + lse) + 4 u (argument rounding,
   * exp within 1 ulp in each path). Sums of n weights (times |v| <= vmax):
   * gamma_n S each, the many path's P - X adds one more, so the evicted
   * mass and sum_E e_p v_p differ by eps_m = (delta + 3 gamma_n) S (times
   * vmax). With 1 - mass >= 1/2 in o' = (o - sum_E) / (1 - mass):
   * |d o'_c| <= 2 eps_m vmax + 4 (omax + S vmax) eps_m + 6 u (omax + S vmax);
   * over the kept keys, a convex combination whose weights move by delta:
   * <= 2.1 delta vmax + 4 gamma_n vmax; eps_o is the sum of both. Then
   * |d rel_error| <= sqrt(d) eps_o / ||o|| + 2 gamma_(d+4) rel_error, and
   * sq_error (sum over the group of ||o' - o||^2) moves by at most
   * group (2 sqrt(D) + sqrt(d) eps_o) sqrt(d) eps_o + 2 gamma_(d+group) D. */
  const double u = 0x1p-53;
  size_t n = meta->n_positions, d = meta->model.head_dim;
  size_t group = meta->model.n_heads / meta->model.n_kv_heads;
#define GAMMA(k) ((k)*u / (1 - (k)*u))
  double delta = 2 * GAMMA(d) * b.B + 2 * u * (2 * b.zmax + b.lse) + 4 * u;
  double eps_m = (delta + 3 * GAMMA(n)) * b.S;
  double eps_o = 2 * eps_m * b.v + 4 * (b.o + b.S * b.v) * eps_m + 6 * u * (b.o + b.S * b.v) +
                 2.1 * delta * b.v + 4 * GAMMA(n) * b.v;
  printf("many-sets offline replay: delta %.3g, mass tolerance %.3g, output tolerance %.3g\n",
         delta, eps_m, eps_o);
  ck_assert_double_lt(delta, 1e-12); /* a meaningful check, not a wide one */

  size_t half_lost = 0, half_lost_few = 0, none_lost = 0;
  double worst_rel = 0.0, worst_mass = 0.0;
  size_t G = meta->model.n_kv_heads, T = ref[0].n_steps, s = meta->n_prompt;
  for (size_t k = 0; k < 2 * N_SETS; k++) {
    if (k < N_SETS) same_numbers(&one[k], &three[k]);
    const ReplayOfflineResult *r = &ref[k % N_SETS], *m = k < N_SETS ? &one[k] : &small[k - N_SETS];
    ck_assert(r->has_needle == m->has_needle);
    for (size_t i = 0; i < r->n_layers * G; i++) {
      if (r->has_needle) ck_assert_double_eq(r->needle_kept[i], m->needle_kept[i]);
      size_t kept = 0;
      for (size_t p = 0; p < s; p++) kept += sets[k % N_SETS].keep[i * s + p];
      for (size_t t = 0; t < T; t++) {
        double D = r->sq_error[i * T + t];
        double tol =
            group * (2 * sqrt(D) + sqrt(d) * eps_o) * sqrt(d) * eps_o + 2 * GAMMA(d + group) * D;
        ck_assert_double_le(fabs(m->sq_error[i * T + t] - D), tol);
        for (size_t j = 0; j < group; j++) {
          size_t at = ((i / G) * r->n_heads + (i % G) * group + j) * T + t;
          double rel = r->rel_error[at], lost = r->mass_lost[at];
          ck_assert_double_gt(b.o_norm[at], 0.0);
          ck_assert_double_le(fabs(m->rel_error[at] - rel),
                              sqrt(d) * eps_o / b.o_norm[at] + 2 * GAMMA(d + 4) * rel);
          ck_assert_double_le(fabs(m->mass_lost[at] - lost), eps_m + u);
          worst_mass = fmax(worst_mass, fabs(m->mass_lost[at] - lost));
          worst_rel = fmax(worst_rel, fabs(m->rel_error[at] - rel));
          half_lost += lost > 0.5 && lost < 1.0;
          half_lost_few += lost > 0.5 && lost < 1.0 && kept > s - kept;
          none_lost += lost == 0.0;
        }
      }
    }
  }
  printf(
      "many-sets offline replay: worst |d mass| %.3g, worst |d rel_error| %.3g; rows with "
      "> 1/2 evicted %zu (%zu of them with fewer evicted than kept keys), none lost %zu\n",
      worst_mass, worst_rel, half_lost, half_lost_few, none_lost);
  ck_assert_uint_gt(half_lost, 0);
  ck_assert_uint_gt(half_lost_few, 0);
  for (size_t k = 0; k < N_SETS; k++) {
    replay_offline_result_free(&ref[k]);
    replay_offline_result_free(&one[k]);
    replay_offline_result_free(&three[k]);
    replay_offline_result_free(&small[k]);
    evict_keep_set_free(&sets[k]);
  }
  free(b.o_norm);
  trace_close(reader);
}
END_TEST

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  Suite *s = suite_create("offline_many");
  TCase *tc = tcase_create("offline_many");
  tcase_add_test(tc, test_many_sets_equal_the_one_set_path);
  suite_add_tcase(s, tc);
  test_scratch_begin("offline_many");
  SRunner *runner = srunner_create(s);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
