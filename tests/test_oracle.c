/* Check suite for oracle/: every exact window error, oracle@1 / oracle@T and
 * set eviction agree with brute force (perturb the token, recompute attention
 * from Q, K, V, measure) on random problems shaped like real traces.
 *
 * Tolerances: DOUBLE uses dgemm and double element-wise work, so the closed
 * forms agree with brute force to ~1e-13; 1e-6 leaves room for the summation
 * order only. FLOAT rounds Q, K, V, O to float before the GEMMs (relative
 * error ~6e-8 per input, ~1e-6 on a logit of size 10): 1e-4 per element. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "fixture_attention.h"
#include "oracle/exact_forms.h"
#include "oracle/fast_exp.h"
#include "oracle/oracle.h"

static const int brute_modes[OBC_EXACT_COUNT] = {FIX_ZERO_V, FIX_ZERO_K, FIX_ZERO_VK, FIX_REMOVE};
static const char *const kind_names[OBC_EXACT_COUNT] = {"exact_v", "exact_k", "exact_vk", "remove"};

/* Worst errors seen, printed at the end (the report's accuracy figures). */
static double worst_double, worst_float;

static void track(OraclePrecision precision, double err) {
  double *worst = precision == OBC_PRECISION_DOUBLE ? &worst_double : &worst_float;
  if (err > *worst) *worst = err;
}

static double tolerance(OraclePrecision precision) {
  return precision == OBC_PRECISION_DOUBLE ? 1e-6 : 1e-4;
}

/* Window errors of one problem, all kinds, windows 1, 7 and s (every prompt
 * row, so row 0 has a single live key), against brute force. */
static void check_windows(uint64_t seed, size_t s, size_t group, OraclePrecision precision) {
  FixtureProblem t;
  fixture_make(&t, seed, s, 3, 16, group, s);
  double *got = malloc(s * sizeof *got), *ref = malloc(s * sizeof *ref);
  size_t windows[3] = {1, 7, s};
  for (int w = 0; w < 3; w++)
    for (int kind = 0; kind < OBC_EXACT_COUNT; kind++) {
      size_t begin, end;
      fixture_window_rows(&t, windows[w], &begin, &end);
      fixture_exact_error(&t, begin, end, brute_modes[kind], ref);
      ck_assert_int_eq(oracle_window_error(&t.head, windows[w], kind, precision, got), 0);
      char what[128];
      snprintf(what, sizeof what, "%s group %zu W %zu %s", kind_names[kind], group, windows[w],
               precision == OBC_PRECISION_DOUBLE ? "double" : "float");
      double err = fixture_rel_error(got, ref, s, tolerance(precision), what);
      track(precision, err);
      ck_assert_msg(err <= tolerance(precision), "%s: rel. error %g", what, err);
    }
  free(got);
  free(ref);
  fixture_free(&t);
}

START_TEST(window_errors_match_brute_force_in_double) {
  check_windows(11, 40, 1, OBC_PRECISION_DOUBLE);
  check_windows(12, 37, 3, OBC_PRECISION_DOUBLE);
  check_windows(13, 33, 4, OBC_PRECISION_DOUBLE);
}
END_TEST

START_TEST(window_errors_match_brute_force_in_float) {
  check_windows(21, 40, 1, OBC_PRECISION_FLOAT);
  check_windows(22, 37, 3, OBC_PRECISION_FLOAT);
  check_windows(23, 33, 4, OBC_PRECISION_FLOAT);
}
END_TEST

START_TEST(window_errors_across_blocks_and_row_chunks_match_brute_force) {
  /* s = 530 and 140 rows span two position blocks and two row chunks. */
  FixtureProblem t;
  size_t s = 530, W = 140;
  fixture_make(&t, 14, s, 1, 8, 1, W);
  double *got = malloc(s * sizeof *got), *ref = malloc(s * sizeof *ref);
  size_t begin, end;
  fixture_window_rows(&t, W, &begin, &end);
  fixture_exact_error(&t, begin, end, FIX_REMOVE, ref);
  ck_assert_int_eq(oracle_window_error(&t.head, W, OBC_EXACT_REMOVE, OBC_PRECISION_DOUBLE, got), 0);
  double err = fixture_rel_error(got, ref, s, 1e-6, "remove s 530 W 140 double");
  track(OBC_PRECISION_DOUBLE, err);
  ck_assert_msg(err <= 1e-6, "rel. error %g", err);
  free(got);
  free(ref);
  fixture_free(&t);
}
END_TEST

/* oracle@1 and oracle@T: decode rows attend to the generated tokens' keys
 * too; only prompt tokens are scored. */
static void check_eviction(uint64_t seed, size_t group, OraclePrecision precision) {
  size_t s = 45, T = 4;
  FixtureProblem t;
  fixture_make(&t, seed, s, T, 16, group, 9);
  double *got = malloc(s * sizeof *got), *ref = malloc(s * sizeof *ref);
  size_t first = t.head.n_rows - T;
  size_t steps[2] = {1, T};
  for (int k = 0; k < 2; k++) {
    fixture_exact_error(&t, first, first + steps[k], FIX_REMOVE, ref);
    ck_assert_int_eq(oracle_eviction_error(&t.head, 1, steps[k], precision, got), 0);
    char what[96];
    snprintf(what, sizeof what, "oracle@%zu group %zu %s", steps[k], group,
             precision == OBC_PRECISION_DOUBLE ? "double" : "float");
    double err = fixture_rel_error(got, ref, s, tolerance(precision), what);
    track(precision, err);
    ck_assert_msg(err <= tolerance(precision), "%s: rel. error %g", what, err);
  }
  free(got);
  free(ref);
  fixture_free(&t);
}

START_TEST(oracle_at_1_and_T_match_brute_force) {
  for (int precision = 0; precision < 2; precision++) {
    check_eviction(31, 1, precision);
    check_eviction(32, 3, precision);
    check_eviction(33, 4, precision);
  }
}
END_TEST

/* oracle_eviction_errors: several ranges from one pass over the union of
 * their rows (overlapping, nested, disjoint), each against brute force at
 * the tolerance of the single-range call. */
START_TEST(several_oracle_ranges_in_one_pass_match_brute_force) {
  size_t s = 45, T = 6;
  for (int precision = 0; precision < 2; precision++) {
    FixtureProblem t;
    fixture_make(&t, 34, s, T, 16, 3, 9);
    size_t first = t.head.n_rows - T;
    size_t first_step[4] = {1, 1, 3, 6}, n_steps[4] = {1, 6, 2, 1};
    double *out[4], *ref = malloc(s * sizeof *ref);
    for (int r = 0; r < 4; r++) out[r] = malloc(s * sizeof *out[r]);
    ck_assert_int_eq(oracle_eviction_errors(&t.head, first_step, n_steps, 4, precision, out), 0);
    for (int r = 0; r < 4; r++) {
      size_t row = first + first_step[r] - 1;
      fixture_exact_error(&t, row, row + n_steps[r], FIX_REMOVE, ref);
      char what[96];
      snprintf(what, sizeof what, "oracle@%zu-%zu of 4 ranges %s", first_step[r],
               first_step[r] + n_steps[r] - 1,
               precision == OBC_PRECISION_DOUBLE ? "double" : "float");
      double err = fixture_rel_error(out[r], ref, s, tolerance(precision), what);
      track(precision, err);
      ck_assert_msg(err <= tolerance(precision), "%s: rel. error %g", what, err);
    }
    for (int r = 0; r < 4; r++) free(out[r]);
    free(ref);
    fixture_free(&t);
  }
}
END_TEST

/* o' over the kept keys, straight from the definition. */
static void brute_set_eviction(const FixtureProblem *t, size_t j, size_t r,
                               const unsigned char *keep, double *o_new, double *mass) {
  size_t d = t->head.head_dim, pos = (size_t)t->positions[r];
  const double *q = t->Q + (j * t->head.n_rows + r) * d;
  double zmax = -HUGE_VAL, total = 0.0, kept = 0.0;
  for (size_t k = 0; k <= pos; k++) {
    double z = t->head.attn_scale * fixture_dot(q, t->K + k * d, d);
    zmax = z > zmax ? z : zmax;
  }
  memset(o_new, 0, d * sizeof *o_new);
  for (size_t k = 0; k <= pos; k++) {
    double w = exp(t->head.attn_scale * fixture_dot(q, t->K + k * d, d) - zmax);
    total += w;
    if (!keep[k]) continue;
    kept += w;
    for (size_t c = 0; c < d; c++) o_new[c] += w * t->V[k * d + c];
  }
  for (size_t c = 0; c < d; c++) o_new[c] = kept > 0 ? o_new[c] / kept : 0.0;
  *mass = 1.0 - kept / total;
}

START_TEST(set_eviction_output_matches_brute_force) {
  FixtureProblem t;
  size_t s = 50, T = 3, d = 16;
  fixture_make(&t, 41, s, T, d, 3, 6);
  unsigned char *keep = malloc(t.head.n_positions);
  double got[16], ref[16], mass_got, mass_ref;
  for (int trial = 0; trial < 12; trial++) {
    /* Random sets; every third trial also evicts the sink (most of the
     * mass), and the generated tokens are sometimes evicted too. */
    for (size_t p = 0; p < t.head.n_positions; p++) keep[p] = fixture_uniform() > 0.4;
    keep[0] = trial % 3 != 0;
    for (size_t j = 0; j < 3; j++)
      for (size_t r = 0; r < t.head.n_rows; r++) {
        ck_assert_int_eq(oracle_set_eviction_output(&t.head, j, r, keep, got, &mass_got), 0);
        brute_set_eviction(&t, j, r, keep, ref, &mass_ref);
        double err = 0.0, norm = 0.0;
        for (size_t c = 0; c < d; c++) {
          err += (got[c] - ref[c]) * (got[c] - ref[c]);
          norm += ref[c] * ref[c];
        }
        /* normwise: o' is a vector, its small components carry no meaning alone */
        ck_assert_msg(sqrt(err) <= 1e-10 * sqrt(norm),
                      "trial %d head %zu row %zu: |o'-ref| %g |ref| %g", trial, j, r, sqrt(err),
                      sqrt(norm));
        ck_assert_msg(fabs(mass_got - mass_ref) <= 1e-12, "mass %.17g vs %.17g", mass_got,
                      mass_ref);
      }
  }
  memset(keep, 0, t.head.n_positions);
  ck_assert_int_eq(oracle_set_eviction_output(&t.head, 1, 2, keep, got, &mass_got), 0);
  ck_assert(mass_got == 1.0);
  for (size_t c = 0; c < d; c++) ck_assert(got[c] == 0.0);
  free(keep);
  fixture_free(&t);
}
END_TEST

START_TEST(oracle_of_a_one_token_set_is_the_eviction_error) {
  FixtureProblem t;
  size_t s = 40, T = 2, d = 16, g = 3;
  fixture_make(&t, 51, s, T, d, g, 4);
  double *oracle = malloc(s * sizeof *oracle), o_new[16], mass;
  ck_assert_int_eq(oracle_eviction_error(&t.head, 1, 1, OBC_PRECISION_DOUBLE, oracle), 0);
  unsigned char *keep = malloc(t.head.n_positions);
  size_t r = t.head.n_rows - T;
  for (size_t p = 0; p < s; p++) {
    memset(keep, 1, t.head.n_positions);
    keep[p] = 0;
    double total = 0.0;
    for (size_t j = 0; j < g; j++) {
      ck_assert_int_eq(oracle_set_eviction_output(&t.head, j, r, keep, o_new, &mass), 0);
      const double *o = t.O + (j * t.head.n_rows + r) * d;
      for (size_t c = 0; c < d; c++) total += (o_new[c] - o[c]) * (o_new[c] - o[c]);
    }
    ck_assert_msg(fabs(total - oracle[p]) <= 1e-9 * total, "p %zu: set %.17g, oracle %.17g", p,
                  total, oracle[p]);
  }
  free(keep);
  free(oracle);
  fixture_free(&t);
}
END_TEST

START_TEST(single_live_key_loses_the_whole_output) {
  /* s = 1: the only prompt row sees only token 0 (A = 1). */
  FixtureProblem t;
  fixture_make(&t, 61, 1, 2, 8, 3, 1);
  double total_oo = 0.0;
  for (size_t j = 0; j < 3; j++) {
    const double *o = t.O + (j * t.head.n_rows) * 8;
    for (size_t c = 0; c < 8; c++) total_oo += o[c] * o[c];
  }
  double got;
  for (int precision = 0; precision < 2; precision++) {
    ck_assert_int_eq(oracle_window_error(&t.head, 1, OBC_EXACT_REMOVE, precision, &got), 0);
    ck_assert_msg(fabs(got - total_oo) <= 1e-12 * total_oo, "remove %g vs ||o||^2 %g", got,
                  total_oo);
    ck_assert_int_eq(oracle_window_error(&t.head, 1, OBC_EXACT_VK, precision, &got), 0);
    ck_assert_msg(fabs(got - total_oo) <= 1e-12 * total_oo, "exact_vk %g", got);
    ck_assert_int_eq(oracle_window_error(&t.head, 1, OBC_EXACT_K, precision, &got), 0);
    ck_assert_msg(got == 0.0, "exact_k %g", got);
  }
  /* As a float capture would store it: O rounded to float, lse off by 1e-7.
   * Position 0 still has one causal key, so the whole output is lost. */
  total_oo = 0.0;
  for (size_t j = 0; j < 3; j++) {
    double *o = t.O + (j * t.head.n_rows) * 8;
    for (size_t c = 0; c < 8; c++) {
      o[c] = (float)o[c];
      total_oo += o[c] * o[c];
    }
    t.lse[j * t.head.n_rows] += 1e-7;
  }
  for (int precision = 0; precision < 2; precision++) {
    ck_assert_int_eq(oracle_window_error(&t.head, 1, OBC_EXACT_REMOVE, precision, &got), 0);
    ck_assert_msg(fabs(got - total_oo) <= 1e-12 * total_oo, "float capture: remove %g vs %g", got,
                  total_oo);
  }
  /* The forms themselves, at A = 1 exactly and just below the guard. */
  OraclePairForms f;
  oracle_pair_forms(1.0, 3.0, 0.0, 0.0, 2.5, 2.5, 0.0, 0.0, &f);
  ck_assert(f.remove == 2.5 && f.exact_vk == 2.5 && f.exact_k == 0.0);
  oracle_pair_forms(1.0 - 1e-13, 30.0, 1e-14, 1e-13, 2.5, 2.5, 1e-30, 1e-30, &f);
  ck_assert(f.remove == 2.5 && f.exact_vk == 2.5 && f.exact_k == 0.0);
  oracle_pair_forms(1.0 - 1e-11, 30.0, 1e-14, 1e-11, 2.5, 2.5, 1e-24, 1e-24, &f);
  ck_assert(isfinite(f.remove) && isfinite(f.exact_vk) && isfinite(f.exact_k));
  fixture_free(&t);
}
END_TEST

START_TEST(fast_exp_matches_libm) {
  double worst = 0.0;
  for (int k = -199990; k <= 200000; k++) {
    double x = k * 3.54e-3 + 1e-7 * (k % 7);
    double ref = exp(x), got = oracle_exp_fast(x);
    double err = ref > 0 ? fabs(got - ref) / ref : fabs(got);
    worst = err > worst ? err : worst;
  }
  ck_assert_msg(worst <= 4.5e-16, "worst relative error %g", worst);
  ck_assert(oracle_exp_fast(-800.0) == 0.0);
  ck_assert(oracle_exp_fast(0.0) == 1.0);
  ck_assert(isinf(oracle_exp_fast(800.0)));
  ck_assert(isnan(oracle_exp_fast(NAN)));
}
END_TEST

START_TEST(uncaptured_rows_are_rejected_with_a_message) {
  FixtureProblem t;
  fixture_make(&t, 71, 20, 2, 8, 1, 5);
  double out[20];
  ck_assert_int_eq(oracle_window_error(&t.head, 6, OBC_EXACT_REMOVE, OBC_PRECISION_DOUBLE, out),
                   OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "not all captured"));
  ck_assert_int_eq(oracle_window_error(&t.head, 0, OBC_EXACT_REMOVE, OBC_PRECISION_DOUBLE, out),
                   OBC_EINVAL);
  ck_assert_int_eq(oracle_eviction_error(&t.head, 1, 3, OBC_PRECISION_DOUBLE, out), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "decode rows"));
  ck_assert_int_eq(oracle_eviction_error(&t.head, 1, 2, OBC_PRECISION_DOUBLE, out), 0);
  fixture_free(&t);
}
END_TEST

START_TEST(results_do_not_depend_on_thread_count) {
  /* s spans several position blocks, so two threads split the work. */
  FixtureProblem t;
  size_t s = 1300;
  fixture_make(&t, 81, s, 3, 16, 3, 150);
  double *one = malloc(s * sizeof *one), *two = malloc(s * sizeof *two);
  int saved = omp_get_max_threads();
  for (int precision = 0; precision < 2; precision++) {
    omp_set_num_threads(1);
    ck_assert_int_eq(oracle_window_error(&t.head, 150, OBC_EXACT_VK, precision, one), 0);
    omp_set_num_threads(2);
    ck_assert_int_eq(oracle_window_error(&t.head, 150, OBC_EXACT_VK, precision, two), 0);
    ck_assert(memcmp(one, two, s * sizeof *one) == 0);
    omp_set_num_threads(1);
    ck_assert_int_eq(oracle_eviction_error(&t.head, 1, 3, precision, one), 0);
    omp_set_num_threads(2);
    ck_assert_int_eq(oracle_eviction_error(&t.head, 1, 3, precision, two), 0);
    ck_assert(memcmp(one, two, s * sizeof *one) == 0);
  }
  omp_set_num_threads(saved);
  free(one);
  free(two);
  fixture_free(&t);
}
END_TEST

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  Suite *suite = suite_create("oracle");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, window_errors_match_brute_force_in_double);
  tcase_add_test(tc, window_errors_match_brute_force_in_float);
  tcase_add_test(tc, window_errors_across_blocks_and_row_chunks_match_brute_force);
  tcase_add_test(tc, oracle_at_1_and_T_match_brute_force);
  tcase_add_test(tc, several_oracle_ranges_in_one_pass_match_brute_force);
  tcase_add_test(tc, set_eviction_output_matches_brute_force);
  tcase_add_test(tc, oracle_of_a_one_token_set_is_the_eviction_error);
  tcase_add_test(tc, single_live_key_loses_the_whole_output);
  tcase_add_test(tc, fast_exp_matches_libm);
  tcase_add_test(tc, uncaptured_rows_are_rejected_with_a_message);
  tcase_add_test(tc, results_do_not_depend_on_thread_count);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  /* One process: the worst errors are gathered across tests and printed. */
  srunner_set_fork_status(runner, CK_NOFORK);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  printf("oracle vs brute force: max rel. error %.3g (double), %.3g (float)\n", worst_double,
         worst_float);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
