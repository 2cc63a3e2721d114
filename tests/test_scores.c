/* Check suite for scores/scores: the fused window sweep gives every score of
 * docs/SCIENCE.md, "Approximate scores", as brute force computes it (A and z by
 * explicit loops), the exact errors as brute force perturbation and oracle.h
 * give them, the same numbers for several windows at once as for one at a time
 * (to rounding: the GEMM shapes differ), and bit-identical results for 1 and 2
 * threads (each output element is summed by one thread in one order, with the
 * same GEMMs).
 *
 * Tolerances as in test_oracle.c: 1e-6 per element in DOUBLE (dgemm, agreement
 * is ~1e-12 in practice), 1e-4 in FLOAT (inputs rounded to float before the
 * GEMMs: ~1e-6 on the logits). */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_startup.h"
#include "scores/scores.h"
#include "common/obc_error.h"
#include "fixture_attention.h"
#include "oracle/oracle.h"

static double worst_double, worst_float;

static void track(OraclePrecision precision, double err) {
  double *worst = precision == OBC_PRECISION_DOUBLE ? &worst_double : &worst_float;
  if (err > *worst) *worst = err;
}

static double tolerance(OraclePrecision precision) {
  return precision == OBC_PRECISION_DOUBLE ? 1e-6 : 1e-4;
}

/* The sweep against oracle.h: the same forms through different loops. In
 * DOUBLE only the exp and the summation order differ (1e-10 is generous); in
 * FLOAT one side may take a single row through sgemv and the other through
 * sgemm, whose float roundings differ (~1e-7 relative on v.o). */
static double agreement(OraclePrecision precision) {
  return precision == OBC_PRECISION_DOUBLE ? 1e-10 : 1e-5;
}

static const char *precision_name(OraclePrecision precision) {
  return precision == OBC_PRECISION_DOUBLE ? "double" : "float";
}

static double *sweep(const FixtureProblem *t, const size_t *windows, size_t n_windows,
                     OraclePrecision precision, ScoreGqa how) {
  ScoreOptions options;
  score_options_default(&options);
  options.precision = precision;
  options.aggregation = how;
  double *out = malloc(n_windows * OBC_Q_COUNT * t->head.n_prompt * sizeof *out);
  int rc = score_window_sweep(&t->head, windows, n_windows, &options, out);
  ck_assert_msg(rc == 0, "sweep failed: %s", obc_error_message());
  return out;
}

/* Scores of windows s, 1 and 7 (out of order) in one sweep, against brute force. */
static void check_scores(uint64_t seed, size_t s, size_t group, OraclePrecision precision) {
  static const char *const how_names[3] = {"sum", "mean", "max"};
  FixtureProblem t;
  fixture_make(&t, seed, s, 2, 16, group, s);
  size_t windows[3] = {s, 1, 7};
  double *ref = malloc(OBC_Q_COUNT * s * sizeof *ref);
  for (int how = 0; how < 3; how++) {
    double *got = sweep(&t, windows, 3, precision, how);
    for (int w = 0; w < 3; w++) {
      fixture_scores(&t, windows[w], how, 7, ref);
      for (int q = 0; q < OBC_Q_EXACT_V; q++) {
        char what[128];
        snprintf(what, sizeof what, "%s (%s) group %zu W %zu %s", score_quantity_name(q),
                 how_names[how], group, windows[w], precision_name(precision));
        double err = fixture_rel_error(got + (w * OBC_Q_COUNT + q) * s, ref + q * s, s,
                                       tolerance(precision), what);
        track(precision, err);
        ck_assert_msg(err <= tolerance(precision), "%s: rel. error %g", what, err);
      }
    }
    free(got);
  }
  free(ref);
  fixture_free(&t);
}

START_TEST(taylor_and_attention_scores_match_brute_force_in_double) {
  check_scores(101, 40, 1, OBC_PRECISION_DOUBLE);
  check_scores(102, 37, 3, OBC_PRECISION_DOUBLE);
  check_scores(103, 33, 4, OBC_PRECISION_DOUBLE);
}
END_TEST

START_TEST(taylor_and_attention_scores_match_brute_force_in_float) {
  check_scores(111, 40, 1, OBC_PRECISION_FLOAT);
  check_scores(112, 37, 3, OBC_PRECISION_FLOAT);
  check_scores(113, 33, 4, OBC_PRECISION_FLOAT);
}
END_TEST

/* Exact errors of the sweep against brute force perturbation, and against
 * oracle_window_error (a separate, unfused code path). */
static void check_exact(uint64_t seed, size_t s, size_t group, OraclePrecision precision) {
  static const int modes[4] = {FIX_ZERO_V, FIX_ZERO_K, FIX_ZERO_VK, FIX_REMOVE};
  FixtureProblem t;
  fixture_make(&t, seed, s, 2, 16, group, s);
  size_t windows[3] = {7, s, 1};
  double *got = sweep(&t, windows, 3, precision, OBC_GQA_MAX);
  double *ref = malloc(s * sizeof *ref), *oracle = malloc(s * sizeof *oracle);
  for (int w = 0; w < 3; w++) {
    size_t begin, end;
    fixture_window_rows(&t, windows[w], &begin, &end);
    for (int kind = 0; kind < OBC_EXACT_COUNT; kind++) {
      const double *mine = got + (w * OBC_Q_COUNT + OBC_Q_EXACT_V + kind) * s;
      fixture_exact_error(&t, begin, end, modes[kind], ref);
      char what[128];
      snprintf(what, sizeof what, "%s group %zu W %zu %s",
               score_quantity_name(OBC_Q_EXACT_V + kind), group, windows[w],
               precision_name(precision));
      double err = fixture_rel_error(mine, ref, s, tolerance(precision), what);
      track(precision, err);
      ck_assert_msg(err <= tolerance(precision), "%s: rel. error %g", what, err);
      ck_assert_int_eq(oracle_window_error(&t.head, windows[w], kind, precision, oracle), 0);
      err = fixture_rel_error(mine, oracle, s, agreement(precision), what);
      ck_assert_msg(err <= agreement(precision), "%s vs oracle.h: rel. error %g", what, err);
    }
  }
  free(got);
  free(ref);
  free(oracle);
  fixture_free(&t);
}

START_TEST(exact_errors_match_brute_force_and_oracle) {
  for (int precision = 0; precision < 2; precision++) {
    check_exact(121, 40, 1, precision);
    check_exact(122, 37, 3, precision);
    check_exact(123, 33, 4, precision);
  }
}
END_TEST

START_TEST(obc_v_is_exactly_exact_v) {
  FixtureProblem t;
  size_t s = 60, windows[2] = {5, 60};
  fixture_make(&t, 131, s, 1, 16, 3, s);
  double *got = sweep(&t, windows, 2, OBC_PRECISION_FLOAT, OBC_GQA_SUM);
  for (int w = 0; w < 2; w++)
    ck_assert(memcmp(got + (w * OBC_Q_COUNT + OBC_Q_OBC_V) * s,
                     got + (w * OBC_Q_COUNT + OBC_Q_EXACT_V) * s, s * sizeof *got) == 0);
  free(got);
  fixture_free(&t);
}
END_TEST

START_TEST(single_live_key_row_loses_the_whole_output_in_the_sweep) {
  /* s = 1: the only prompt row sees only token 0 (A = 1). */
  FixtureProblem t;
  size_t window = 1;
  fixture_make(&t, 161, 1, 2, 8, 3, 1);
  double oo = 0.0;
  for (size_t j = 0; j < 3; j++)
    for (size_t c = 0; c < 8; c++)
      oo += t.O[(j * t.head.n_rows) * 8 + c] * t.O[(j * t.head.n_rows) * 8 + c];
  for (int precision = 0; precision < 2; precision++) {
    if (precision == 1) /* as a float capture: lse off by 1e-7, A = 1 still */
      for (size_t j = 0; j < 3; j++) t.lse[j * t.head.n_rows] += 1e-7;
    double *got = sweep(&t, &window, 1, precision, OBC_GQA_SUM);
    ck_assert_msg(fabs(got[OBC_Q_ATTN] - 3.0) <= 1e-12, "attn %.17g", got[OBC_Q_ATTN]);
    ck_assert_msg(fabs(got[OBC_Q_REMOVE] - oo) <= 1e-12 * oo, "remove %g vs %g", got[OBC_Q_REMOVE],
                  oo);
    ck_assert_msg(fabs(got[OBC_Q_EXACT_VK] - oo) <= 1e-12 * oo, "exact_vk %g", got[OBC_Q_EXACT_VK]);
    ck_assert_msg(got[OBC_Q_EXACT_K] == 0.0, "exact_k %g", got[OBC_Q_EXACT_K]);
    ck_assert_msg(fabs(got[OBC_Q_EXACT_V] - oo) <= 1e-12 * oo, "exact_v %g", got[OBC_Q_EXACT_V]);
    free(got);
  }
  fixture_free(&t);
}
END_TEST

/* A problem large enough for several position blocks and row chunks. */
static void make_large(FixtureProblem *t) { fixture_make(t, 141, 700, 2, 16, 3, 300); }

/* A single-window sweep runs GEMMs of as many rows as its window, the
 * seven-window sweep GEMMs of up to 128 rows, and OpenBLAS picks kernels (and
 * so summation orders) by shape and processor: the two agree to rounding, not
 * bit for bit. A snapshot taken at the wrong row would be off by >= 1/300. */
START_TEST(one_sweep_equals_separate_single_window_sweeps) {
  FixtureProblem t;
  make_large(&t);
  size_t s = t.head.n_prompt;
  size_t windows[7] = {300, 1, 2, 129, 64, 128, 256};
  for (int precision = 0; precision < 2; precision++) {
    double *all = sweep(&t, windows, 7, precision, OBC_GQA_MEAN);
    for (int w = 0; w < 7; w++) {
      double *one = sweep(&t, &windows[w], 1, precision, OBC_GQA_MEAN);
      for (int q = 0; q < OBC_Q_COUNT; q++) {
        char what[128];
        snprintf(what, sizeof what, "%s W %zu %s: 7-window vs 1-window sweep",
                 score_quantity_name(q), windows[w], precision_name(precision));
        const double *mine = all + (w * OBC_Q_COUNT + q) * s, *ref = one + q * s;
        /* DOUBLE: dgemm dots of 16 products move by <= 16 * 2^-53 of their terms
         * under reordering; agreement() (1e-10) also covers the 1/|z| of obc_k's
         * z^2 elementwise. FLOAT: sgemm moves each dot by <= 16 * 2^-24 (1e-6) of
         * its terms, which the forms' squares of a and z at most quadruple; an
         * element near z = 0 has no relative accuracy (obc_k ~ z^2), so compare
         * normwise at 1e-5. */
        int dbl = precision == OBC_PRECISION_DOUBLE;
        double tol = dbl ? agreement(precision) : 1e-5;
        double err = dbl ? fixture_rel_error(mine, ref, s, tol, what)
                         : fixture_normwise_error(mine, ref, s, tol, what);
        ck_assert_msg(err <= tol, "%s: error %g", what, err);
      }
      free(one);
    }
    free(all);
  }
  fixture_free(&t);
}
END_TEST

START_TEST(large_sweep_matches_brute_force_scores_and_oracle) {
  FixtureProblem t;
  make_large(&t);
  size_t s = t.head.n_prompt;
  size_t windows[3] = {129, 300, 3};
  double *ref = malloc(OBC_Q_COUNT * s * sizeof *ref), *oracle = malloc(s * sizeof *oracle);
  for (int precision = 0; precision < 2; precision++) {
    double *got = sweep(&t, windows, 3, precision, OBC_GQA_SUM);
    for (int w = 0; w < 3; w++) {
      fixture_scores(&t, windows[w], OBC_GQA_SUM, 7, ref);
      for (int q = 0; q < OBC_Q_COUNT; q++) {
        char what[128];
        snprintf(what, sizeof what, "%s W %zu s %zu %s", score_quantity_name(q), windows[w], s,
                 precision_name(precision));
        const double *mine = got + (w * OBC_Q_COUNT + q) * s;
        if (score_quantity_is_score(q)) {
          double err = fixture_rel_error(mine, ref + q * s, s, tolerance(precision), what);
          track(precision, err);
          ck_assert_msg(err <= tolerance(precision), "%s: rel. error %g", what, err);
        } else {
          ck_assert_int_eq(
              oracle_window_error(&t.head, windows[w], q - OBC_Q_EXACT_V, precision, oracle), 0);
          double err = fixture_rel_error(mine, oracle, s, agreement(precision), what);
          ck_assert_msg(err <= agreement(precision), "%s vs oracle.h: rel. error %g", what, err);
        }
      }
    }
    free(got);
  }
  free(ref);
  free(oracle);
  fixture_free(&t);
}
END_TEST

START_TEST(one_and_two_threads_give_identical_results) {
  FixtureProblem t;
  make_large(&t);
  size_t s = t.head.n_prompt, windows[3] = {1, 300, 17};
  int saved = omp_get_max_threads();
  for (int precision = 0; precision < 2; precision++) {
    omp_set_num_threads(1);
    double *one = sweep(&t, windows, 3, precision, OBC_GQA_MAX);
    omp_set_num_threads(2);
    double *two = sweep(&t, windows, 3, precision, OBC_GQA_MAX);
    ck_assert(memcmp(one, two, 3 * OBC_Q_COUNT * s * sizeof *one) == 0);
    free(one);
    free(two);
  }
  omp_set_num_threads(saved);
  fixture_free(&t);
}
END_TEST

START_TEST(concurrent_sweeps_inside_a_parallel_region_match_serial_ones) {
  /* The analysis may run heads in parallel: each call then runs on its own
   * thread (no nested team) and must give the serial result. */
  FixtureProblem t[2];
  fixture_make(&t[0], 171, 300, 1, 16, 3, 40);
  fixture_make(&t[1], 172, 300, 1, 16, 1, 40);
  size_t windows[2] = {40, 4}, n = 2 * OBC_Q_COUNT * 300;
  double *serial[2], *parallel[2];
  for (int k = 0; k < 2; k++) {
    serial[k] = sweep(&t[k], windows, 2, OBC_PRECISION_FLOAT, OBC_GQA_SUM);
    parallel[k] = malloc(n * sizeof(double));
  }
  ScoreOptions options;
  score_options_default(&options);
  int rc[2] = {-1, -1};
#pragma omp parallel for num_threads(2)
  for (int k = 0; k < 2; k++)
    rc[k] = score_window_sweep(&t[k].head, windows, 2, &options, parallel[k]);
  for (int k = 0; k < 2; k++) {
    ck_assert_int_eq(rc[k], 0);
    ck_assert(memcmp(serial[k], parallel[k], n * sizeof(double)) == 0);
    free(serial[k]);
    free(parallel[k]);
    fixture_free(&t[k]);
  }
}
END_TEST

START_TEST(max_pool_takes_the_largest_neighbour_with_clamped_edges) {
  const double in[7] = {1, 5, 2, 0, 0, 3, 0};
  double out[7];
  const double k3[7] = {5, 5, 5, 2, 3, 3, 3};
  score_max_pool(in, 7, 3, out);
  for (int p = 0; p < 7; p++) ck_assert(out[p] == k3[p]);
  const double k5[7] = {5, 5, 5, 5, 3, 3, 3};
  score_max_pool(in, 7, 5, out);
  for (int p = 0; p < 7; p++) ck_assert(out[p] == k5[p]);
  score_max_pool(in, 7, 1, out);
  for (int p = 0; p < 7; p++) ck_assert(out[p] == in[p]);
  score_max_pool(in, 7, 21, out); /* wider than the input: the global max */
  for (int p = 0; p < 7; p++) ck_assert(out[p] == 5);
  score_max_pool(in, 1, 7, out);
  ck_assert(out[0] == 1);
}
END_TEST

START_TEST(names_round_trip_and_defaults_are_float_sum_kernel_7) {
  for (int q = 0; q < OBC_Q_COUNT; q++)
    ck_assert_int_eq(score_quantity_from_name(score_quantity_name(q)), q);
  ck_assert_str_eq(score_quantity_name(OBC_Q_OBC_VK), "obc_vk");
  ck_assert_str_eq(score_quantity_name(OBC_Q_REMOVE), "remove");
  ck_assert_int_eq(score_quantity_from_name("h2o"), -1);
  ck_assert(score_quantity_is_score(OBC_Q_ATTN_MAXPOOL));
  ck_assert(!score_quantity_is_score(OBC_Q_EXACT_V));
  ScoreOptions options;
  score_options_default(&options);
  ck_assert_int_eq(options.precision, OBC_PRECISION_FLOAT);
  ck_assert_int_eq(options.aggregation, OBC_GQA_SUM);
  ck_assert_uint_eq(options.maxpool_kernel, 7);
}
END_TEST

START_TEST(bad_windows_and_kernels_are_rejected_with_a_message) {
  FixtureProblem t;
  fixture_make(&t, 151, 30, 2, 8, 1, 10);
  ScoreOptions options;
  score_options_default(&options);
  double *out = malloc(2 * OBC_Q_COUNT * 30 * sizeof *out);
  size_t too_big[2] = {3, 11}, zero[1] = {0}, ok[2] = {10, 10};
  ck_assert_int_eq(score_window_sweep(&t.head, too_big, 2, &options, out), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "window 11"));
  ck_assert_int_eq(score_window_sweep(&t.head, zero, 1, &options, out), OBC_EINVAL);
  ck_assert_int_eq(score_window_sweep(&t.head, ok, 0, &options, out), OBC_EINVAL);
  options.maxpool_kernel = 6;
  ck_assert_int_eq(score_window_sweep(&t.head, ok, 2, &options, out), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "kernel 6"));
  options.maxpool_kernel = 7;
  ck_assert_int_eq(score_window_sweep(&t.head, ok, 2, &options, out), 0); /* duplicates are fine */
  ck_assert(memcmp(out, out + OBC_Q_COUNT * 30, OBC_Q_COUNT * 30 * sizeof *out) == 0);
  free(out);
  fixture_free(&t);
}
END_TEST

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  Suite *suite = suite_create("scores");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, taylor_and_attention_scores_match_brute_force_in_double);
  tcase_add_test(tc, taylor_and_attention_scores_match_brute_force_in_float);
  tcase_add_test(tc, exact_errors_match_brute_force_and_oracle);
  tcase_add_test(tc, obc_v_is_exactly_exact_v);
  tcase_add_test(tc, single_live_key_row_loses_the_whole_output_in_the_sweep);
  tcase_add_test(tc, one_sweep_equals_separate_single_window_sweeps);
  tcase_add_test(tc, large_sweep_matches_brute_force_scores_and_oracle);
  tcase_add_test(tc, one_and_two_threads_give_identical_results);
  tcase_add_test(tc, concurrent_sweeps_inside_a_parallel_region_match_serial_ones);
  tcase_add_test(tc, max_pool_takes_the_largest_neighbour_with_clamped_edges);
  tcase_add_test(tc, names_round_trip_and_defaults_are_float_sum_kernel_7);
  tcase_add_test(tc, bad_windows_and_kernels_are_rejected_with_a_message);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_set_fork_status(runner, CK_NOFORK);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  printf("scores vs brute force: max rel. error %.3g (double), %.3g (float)\n", worst_double,
         worst_float);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
