/* Check suite for eval/stats.h against the independent values of
 * tests/eval_stats_reference.py (textbook formulas in plain Python, written
 * into tests/eval_stats_expected.h; the CTest eval_stats_fixture checks
 * that the header is what the script prints), plus the properties each
 * statistic must have whatever its input: Wilson contains the share,
 * McNemar is symmetric, the bootstrap is a pure function of its seed,
 * RULER's score interval holds its mean, the sign-flip p on 0/1 outcomes is
 * McNemar's, the AUC equals the brute-force count over all pairs. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "prompts/niah_random.h"
#include "common/obc_startup.h"
#include "eval/stats.h"
#include "tests/eval_stats_expected.h"
#include "tests/test_env.h"

#define Z95 1.959963984540054

static double expected(const char *name) {
  for (size_t i = 0; i < sizeof EVAL_EXPECTED / sizeof EVAL_EXPECTED[0]; i++)
    if (!strcmp(EVAL_EXPECTED[i].name, name)) return EVAL_EXPECTED[i].value;
  ck_abort_msg("no reference value '%s' in tests/eval_stats_expected.h", name);
  return NAN;
}

/* ---- matches ---- */

START_TEST(matches_follow_ruler_string_match_all_and_part) {
  for (size_t i = 0; i < sizeof MATCH_CASES / sizeof MATCH_CASES[0]; i++) {
    const EvalMatchCase *m = &MATCH_CASES[i];
    char name[64];
    snprintf(name, sizeof name, "match_all_%s", m->name);
    ck_assert_double_eq(eval_match_all(m->pred, m->refs, m->n_refs), expected(name));
    snprintf(name, sizeof name, "match_part_%s", m->name);
    ck_assert_double_eq(eval_match_part(m->pred, m->refs, m->n_refs), expected(name));
  }
}
END_TEST

START_TEST(matches_ignore_ascii_case_and_score_no_refs_zero) {
  const char *refs[] = {"Quiet-Lantern", "7654321"};
  ck_assert_double_eq(eval_match_all("the key QUIET-lantern is 7654321", refs, 2), 1.0);
  ck_assert_double_eq(eval_match_all("quiet-lanter 765432", refs, 2), 0.0);
  ck_assert_double_eq(eval_match_part("7654321", refs, 2), 1.0);
  ck_assert_double_eq(eval_match_all("anything", refs, 0), 0.0);
  ck_assert_double_eq(eval_match_part("anything", refs, 0), 0.0);
  const char *longer[] = {"a much longer reference than the prediction"};
  ck_assert_double_eq(eval_match_all("short", longer, 1), 0.0);
}
END_TEST

/* ---- Wilson ---- */

/* The reference takes the roots of the quadratic by the quadratic formula,
 * which cancels b^2 - 4ac; its roots carry a few units of 1e-16 relative
 * error each, so 1e-14 absolute on values in [0, 1]. */
#define WILSON_TOLERANCE 1e-14

START_TEST(wilson_matches_the_roots_of_its_quadratic) {
  const size_t cases[][2] = {{0, 10}, {10, 10}, {5, 10}, {81, 263}, {0, 0}};
  for (size_t i = 0; i < 5; i++) {
    double low, high;
    eval_wilson(cases[i][0], cases[i][1], Z95, &low, &high);
    char name[64];
    snprintf(name, sizeof name, "wilson_low_%zu_%zu", cases[i][0], cases[i][1]);
    ck_assert_double_eq_tol(low, expected(name), WILSON_TOLERANCE);
    snprintf(name, sizeof name, "wilson_high_%zu_%zu", cases[i][0], cases[i][1]);
    ck_assert_double_eq_tol(high, expected(name), WILSON_TOLERANCE);
  }
  double low, high;
  eval_wilson(0, 10, Z95, &low, &high);
  ck_assert_double_eq(low, 0.0);
  eval_wilson(10, 10, Z95, &low, &high);
  ck_assert_double_eq(high, 1.0);
  eval_wilson(0, 0, Z95, &low, &high);
  ck_assert(low == 0.0 && high == 1.0);
}
END_TEST

START_TEST(wilson_contains_the_share_within_the_unit_interval) {
  for (size_t n = 1; n <= 60; n++)
    for (size_t k = 0; k <= n; k++) {
      double low, high, p = (double)k / (double)n;
      eval_wilson(k, n, Z95, &low, &high);
      ck_assert_msg(0.0 <= low && low <= p && p <= high && high <= 1.0,
                    "k=%zu n=%zu: [%g, %g] around %g", k, n, low, high, p);
      double low_mirror, high_mirror; /* n - k successes: the mirror image */
      eval_wilson(n - k, n, Z95, &low_mirror, &high_mirror);
      ck_assert_double_eq_tol(low, 1 - high_mirror, WILSON_TOLERANCE);
    }
}
END_TEST

/* ---- McNemar ---- */

/* The reference sums exact fractions; eval_mcnemar_exact takes the largest
 * term from lgamma of numbers up to 2001! (about 13206, whose double has
 * an ulp of 1.8e-12: a few ulps of the exponent are below 1e-11 relative in
 * p) and the tail by ratios (one rounding per term, below 1e-12 for 1000
 * terms). */
#define MCNEMAR_RELATIVE_TOLERANCE 1e-10

START_TEST(mcnemar_matches_the_exact_binomial_tail) {
  const size_t cases[][2] = {{0, 0},   {0, 5}, {5, 0},      {1, 9},      {9, 1},      {10, 25},
                             {25, 10}, {7, 7}, {980, 1020}, {900, 1100}, {1100, 900}, {0, 2000}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[64];
    snprintf(name, sizeof name, "mcnemar_%zu_%zu", cases[i][0], cases[i][1]);
    double p = eval_mcnemar_exact(cases[i][0], cases[i][1]), want = expected(name);
    ck_assert_msg(fabs(p - want) <= MCNEMAR_RELATIVE_TOLERANCE * want, "%s: %.17g, expected %.17g",
                  name, p, want);
  }
  ck_assert_double_eq(eval_mcnemar_exact(0, 0), 1.0);
  ck_assert_double_eq(eval_mcnemar_exact(0, 5), 0.0625);
}
END_TEST

START_TEST(mcnemar_is_symmetric_and_a_probability) {
  for (size_t b = 0; b < 60; b++)
    for (size_t c = 0; c < 60; c++) {
      double p = eval_mcnemar_exact(b, c);
      ck_assert_double_eq(p, eval_mcnemar_exact(c, b));
      ck_assert(p > 0.0 && p <= 1.0);
      if (b < c) ck_assert(eval_mcnemar_exact(b, c + 1) <= p); /* further apart: smaller */
    }
  ck_assert(eval_mcnemar_exact(100000, 100000) == 1.0);
  double p = eval_mcnemar_exact(99000, 101000); /* z about 4.5: p about 8e-6 */
  ck_assert(isfinite(p) && p > 1e-7 && p < 1e-4);
}
END_TEST

/* ---- bootstrap ---- */

START_TEST(bootstrap_replays_the_reference_draws_exactly) {
  /* The reference repeats the same draws, sums and interpolation in the
   * same order: bit-equal. */
  double low, high;
  eval_paired_bootstrap(BOOT_TINY_X, BOOT_TINY_Y, 5, BOOT_TINY_RESAMPLES, BOOT_TINY_LEVEL,
                        BOOT_TINY_SEED, &low, &high);
  ck_assert_double_eq(low, expected("bootstrap_tiny_low"));
  ck_assert_double_eq(high, expected("bootstrap_tiny_high"));
  size_t n = sizeof BOOT_LARGE_X / sizeof BOOT_LARGE_X[0];
  eval_paired_bootstrap(BOOT_LARGE_X, BOOT_LARGE_Y, n, BOOT_LARGE_RESAMPLES, BOOT_LARGE_LEVEL,
                        BOOT_LARGE_SEED, &low, &high);
  ck_assert_double_eq(low, expected("bootstrap_large_low"));
  ck_assert_double_eq(high, expected("bootstrap_large_high"));
  double mean = expected("bootstrap_large_mean");
  ck_assert(low <= mean && mean <= high);
}
END_TEST

START_TEST(bootstrap_is_a_pure_function_of_its_seed) {
  size_t n = sizeof BOOT_LARGE_X / sizeof BOOT_LARGE_X[0];
  double a_low, a_high, b_low, b_high, c_low, c_high;
  eval_paired_bootstrap(BOOT_LARGE_X, BOOT_LARGE_Y, n, 500, 0.95, 3, &a_low, &a_high);
  eval_paired_bootstrap(BOOT_LARGE_X, BOOT_LARGE_Y, n, 500, 0.95, 3, &b_low, &b_high);
  eval_paired_bootstrap(BOOT_LARGE_X, BOOT_LARGE_Y, n, 500, 0.95, 4, &c_low, &c_high);
  ck_assert(a_low == b_low && a_high == b_high);
  ck_assert(a_low != c_low || a_high != c_high);
  ck_assert(a_low < a_high);
}
END_TEST

START_TEST(bootstrap_of_identical_or_shifted_values_is_a_point) {
  double x[16], y[16], low, high;
  NiahRandom random;
  niah_random_seed(&random, 11);
  for (size_t i = 0; i < 16; i++) x[i] = (double)niah_random_below(&random, 2);
  eval_paired_bootstrap(x, x, 16, 200, 0.95, 1, &low, &high);
  ck_assert(low == 0.0 && high == 0.0);
  for (size_t i = 0; i < 16; i++) y[i] = x[i] + 0.25; /* every difference exactly 0.25 */
  eval_paired_bootstrap(x, y, 16, 200, 0.95, 1, &low, &high);
  ck_assert(low == 0.25 && high == 0.25);
  eval_paired_bootstrap(x, y, 0, 200, 0.95, 1, &low, &high);
  ck_assert(isnan(low) && isnan(high));
}
END_TEST

/* ---- RULER's score ---- */

static const size_t NO_STRATA[16] = {0};

START_TEST(score_mean_and_bootstrap_replay_the_reference) {
  size_t n = sizeof SCORE_X / sizeof SCORE_X[0];
  /* The same sums in the same order: bit-equal. */
  ck_assert_double_eq(eval_stratified_mean(SCORE_X, SCORE_TASK, n, 3), expected("score_mean"));
  ck_assert_double_eq(eval_stratified_mean(SCORE_X, NO_STRATA, n, 1),
                      expected("score_mean_pooled"));
  double low, high;
  eval_stratified_bootstrap(SCORE_X, SCORE_TASK, n, 3, SCORE_BOOT_RESAMPLES, SCORE_BOOT_LEVEL,
                            SCORE_BOOT_SEED, &low, &high);
  ck_assert_double_eq(low, expected("score_boot_low"));
  ck_assert_double_eq(high, expected("score_boot_high"));
  ck_assert(low <= expected("score_mean") && expected("score_mean") <= high);
  eval_stratified_bootstrap(SCORE_X, NO_STRATA, n, 1, SCORE_BOOT_RESAMPLES, SCORE_BOOT_LEVEL,
                            SCORE_BOOT_SEED, &low, &high);
  ck_assert_double_eq(low, expected("score_boot_pooled_low"));
  ck_assert_double_eq(high, expected("score_boot_pooled_high"));
}
END_TEST

START_TEST(score_bootstrap_with_one_stratum_is_the_paired_bootstrap) {
  size_t n = sizeof BOOT_LARGE_X / sizeof BOOT_LARGE_X[0];
  double zero[64] = {0}, difference[64], a_low, a_high, b_low, b_high;
  size_t strata[64] = {0};
  for (size_t i = 0; i < n; i++) difference[i] = BOOT_LARGE_Y[i] - BOOT_LARGE_X[i];
  eval_paired_bootstrap(zero, difference, n, 700, 0.9, 9, &a_low, &a_high);
  eval_stratified_bootstrap(difference, strata, n, 1, 700, 0.9, 9, &b_low, &b_high);
  ck_assert(a_low == b_low && a_high == b_high);
  /* Empty strata are skipped; a constant gives a point; no values gives NaN. */
  for (size_t i = 0; i < n; i++) strata[i] = 2 * (i % 2);
  double mean = eval_stratified_mean(difference, strata, n, 4);
  eval_stratified_bootstrap(difference, strata, n, 4, 700, 0.95, 9, &b_low, &b_high);
  ck_assert(b_low <= mean && mean <= b_high);
  const double half[4] = {0.5, 0.5, 0.5, 0.5};
  eval_stratified_bootstrap(half, strata, 4, 3, 100, 0.95, 1, &b_low, &b_high);
  ck_assert(b_low == 0.5 && b_high == 0.5);
  eval_stratified_bootstrap(half, strata, 0, 3, 100, 0.95, 1, &b_low, &b_high);
  ck_assert(isnan(b_low) && isnan(b_high) && isnan(eval_stratified_mean(half, strata, 0, 3)));
}
END_TEST

/* ---- sign-flip test ---- */

START_TEST(sign_flip_matches_the_enumeration_and_the_replayed_draws) {
  static const struct {
    const char *name;
    const double *d;
    size_t n;
  } cases[] = {
      {"sign_flip_partial", SIGN_FLIP_PARTIAL, sizeof SIGN_FLIP_PARTIAL / sizeof(double)},
      {"sign_flip_ties", SIGN_FLIP_TIES, sizeof SIGN_FLIP_TIES / sizeof(double)},
      {"sign_flip_zero", SIGN_FLIP_ZERO, sizeof SIGN_FLIP_ZERO / sizeof(double)},
      {"sign_flip_sixteen", SIGN_FLIP_SIXTEEN, sizeof SIGN_FLIP_SIXTEEN / sizeof(double)},
  };
  /* Exact: a count of assignments over a power of two, exact in double. */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ck_assert_msg(eval_sign_flip_p(cases[i].d, cases[i].n, 100, 1) == expected(cases[i].name), "%s",
                  cases[i].name);
  size_t n = sizeof SIGN_FLIP_MC / sizeof SIGN_FLIP_MC[0];
  ck_assert_double_eq(eval_sign_flip_p(SIGN_FLIP_MC, n, SIGN_FLIP_MC_RESAMPLES, SIGN_FLIP_MC_SEED),
                      expected("sign_flip_mc"));
}
END_TEST

START_TEST(sign_flip_of_zero_one_outcomes_is_mcnemar) {
  /* b differences of -1 and c of +1: P(|sum| >= |c - b|) is the exact
   * two-sided McNemar p, enumerated up to 16 and drawn beyond. */
  double d[40];
  for (size_t b = 0; b <= 8; b++)
    for (size_t c = 0; b + c <= 16; c++) {
      for (size_t i = 0; i < b + c; i++) d[i] = i < b ? -1.0 : 1.0;
      d[b + c] = 0.0;
      double want = eval_mcnemar_exact(b, c); /* from lgamma: MCNEMAR_RELATIVE_TOLERANCE */
      ck_assert_double_eq_tol(eval_sign_flip_p(d, b + c + 1, 10, 1), want,
                              MCNEMAR_RELATIVE_TOLERANCE * want);
    }
  /* 10 vs 26: the Monte Carlo p of 20000 draws within 4 standard errors of
   * the exact 0.0113 (a fixed seed, so this is a check of the draw rule,
   * not a flaky bound). */
  for (size_t i = 0; i < 36; i++) d[i] = i < 10 ? -1.0 : 1.0;
  double want = eval_mcnemar_exact(10, 26), p = eval_sign_flip_p(d, 36, 20000, 3);
  ck_assert_double_eq_tol(p, want, 4 * sqrt(want * (1 - want) / 20000) + 1.0 / 20001);
  ck_assert(p == eval_sign_flip_p(d, 36, 20000, 3));
}
END_TEST

/* ---- AUC ---- */

/* The brute-force twin: every (positive, negative) pair, 1 for a win, 1/2 for a tie. */
static double auc_brute_force(const double *value, const unsigned char *label, size_t n) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++)
      if (label[i] && !label[j]) {
        pairs += 1;
        wins += value[i] > value[j] ? 1.0 : value[i] == value[j] ? 0.5 : 0.0;
      }
  return pairs ? wins / pairs : NAN;
}

/* The power is a sum of positive terms, each an exp of lgamma and log
 * sums of magnitude below 2000 (n <= 200): an absolute error of about
 * 2000 * 2^-52 in each exponent, 5e-13 relative in each term and so in the
 * sum; 1e-10 leaves room for the reference's float products. */
#define POWER_RELATIVE_TOLERANCE 1e-10
/* Both sides bisect (to 1e-9 and 1e-10) a power curve whose slope in delta
 * is above 1 where it crosses 80%: the roots agree within the coarser
 * step plus the power's error over the slope. */
#define MDE_TOLERANCE 2e-9

START_TEST(mcnemar_power_matches_the_enumeration_of_every_outcome) {
  for (size_t i = 0; i < sizeof POWER_CASES / sizeof POWER_CASES[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "power_%zu", i);
    const double *c = POWER_CASES[i];
    double got = eval_mcnemar_power((size_t)c[0], c[1], c[2], 0.05), want = expected(name);
    ck_assert_msg(fabs(got - want) <= POWER_RELATIVE_TOLERANCE * want,
                  "%s (n %g, psi %g, delta %g): %.17g, expected %.17g", name, c[0], c[1], c[2], got,
                  want);
  }
  /* the size of the exact test stays below alpha; no discordance, no power */
  ck_assert_double_le(eval_mcnemar_power(60, 0.5, 0.0, 0.05), 0.05);
  ck_assert_double_eq(eval_mcnemar_power(100, 0.0, 0.0, 0.05), 0.0);
  /* symmetric in the sign of the difference */
  ck_assert_double_eq_tol(eval_mcnemar_power(200, 0.1, 0.05, 0.05),
                          eval_mcnemar_power(200, 0.1, -0.05, 0.05), 1e-12);
}
END_TEST

START_TEST(mcnemar_mde_matches_the_bisected_enumeration) {
  for (size_t i = 0; i < sizeof MDE_CASES / sizeof MDE_CASES[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "mde_%zu", i);
    double got = eval_mcnemar_mde((size_t)MDE_CASES[i][0], MDE_CASES[i][1], 0.05, 0.8);
    ck_assert_msg(fabs(got - expected(name)) <= MDE_TOLERANCE, "%s: %.12g, expected %.12g", name,
                  got, expected(name));
  }
  /* 20 pairs at 5% discordance: about one discordant pair, never significant */
  ck_assert(isnan(eval_mcnemar_mde(20, 0.05, 0.05, 0.8)));
  ck_assert(isnan(eval_mcnemar_mde(600, 0.0, 0.05, 0.8)));
  /* more pairs detect less */
  ck_assert_double_lt(eval_mcnemar_mde(600, 0.2, 0.05, 0.8), eval_mcnemar_mde(200, 0.2, 0.05, 0.8));
}
END_TEST

START_TEST(connor_samples_and_holm_match_their_formulas) {
  for (size_t i = 0; i < sizeof CONNOR_CASES / sizeof CONNOR_CASES[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "connor_%zu", i);
    double got = eval_mcnemar_samples_normal(CONNOR_CASES[i][0], CONNOR_CASES[i][1]);
    ck_assert_double_eq_tol(got, expected(name), 1e-12 * expected(name));
  }
  ck_assert(isnan(eval_mcnemar_samples_normal(0.1, 0.2))); /* delta beyond the discordance */
  ck_assert(isnan(eval_mcnemar_samples_normal(0.1, 0.0)));
  enum { N_HOLM = sizeof HOLM_P / sizeof HOLM_P[0] };
  double p[N_HOLM];
  memcpy(p, HOLM_P, sizeof p);
  eval_holm(p, N_HOLM);
  for (size_t i = 0; i < N_HOLM; i++) {
    char name[32];
    snprintf(name, sizeof name, "holm_%zu", i);
    /* products of a p by a small integer: one rounding each side */
    ck_assert_double_eq_tol(p[i], expected(name), 1e-15);
  }
}
END_TEST

START_TEST(auc_of_separated_reversed_and_tied_classes) {
  const double value[] = {0.1, 0.2, 0.3, 0.7, 0.8, 0.9};
  const unsigned char up[] = {0, 0, 0, 1, 1, 1}, down[] = {1, 1, 1, 0, 0, 0};
  ck_assert_double_eq(eval_auc(value, up, 6), 1.0);
  ck_assert_double_eq(eval_auc(value, down, 6), 0.0);
  const double same[] = {0.4, 0.4, 0.4, 0.4};
  const unsigned char mixed[] = {1, 0, 1, 0};
  ck_assert_double_eq(eval_auc(same, mixed, 4), 0.5);
  ck_assert_double_eq(eval_auc(AUC_HAND_VALUE, AUC_HAND_LABEL, 4), expected("auc_hand"));
  ck_assert_double_eq(eval_auc(AUC_TIES_VALUE, AUC_TIES_LABEL, 6), expected("auc_ties"));
  ck_assert(isnan(eval_auc(value, up, 3)));         /* no positive */
  ck_assert(isnan(eval_auc(value + 3, up + 3, 3))); /* no negative */
  ck_assert(isnan(eval_auc(value, up, 0)));
}
END_TEST

START_TEST(auc_equals_the_count_over_all_pairs) {
  enum { N = 300 };
  double value[N];
  unsigned char label[N];
  NiahRandom random;
  niah_random_seed(&random, 5);
  for (size_t i = 0; i < N; i++) {
    value[i] = (double)niah_random_below(&random, 20) / 20; /* many ties */
    label[i] = niah_random_below(&random, 100) < 30 + 50 * value[i];
  }
  /* Both divide a count of halves (exact in double) by the same product. */
  ck_assert_double_eq(eval_auc(value, label, N), auc_brute_force(value, label, N));
}
END_TEST

int main(int argc, char **argv) {
  (void)argc;
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  Suite *suite = suite_create("eval_stats");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, TEST_TIMEOUT_S);
  tcase_add_test(tc, matches_follow_ruler_string_match_all_and_part);
  tcase_add_test(tc, matches_ignore_ascii_case_and_score_no_refs_zero);
  tcase_add_test(tc, wilson_matches_the_roots_of_its_quadratic);
  tcase_add_test(tc, wilson_contains_the_share_within_the_unit_interval);
  tcase_add_test(tc, mcnemar_matches_the_exact_binomial_tail);
  tcase_add_test(tc, mcnemar_is_symmetric_and_a_probability);
  tcase_add_test(tc, bootstrap_replays_the_reference_draws_exactly);
  tcase_add_test(tc, bootstrap_is_a_pure_function_of_its_seed);
  tcase_add_test(tc, bootstrap_of_identical_or_shifted_values_is_a_point);
  tcase_add_test(tc, score_mean_and_bootstrap_replay_the_reference);
  tcase_add_test(tc, score_bootstrap_with_one_stratum_is_the_paired_bootstrap);
  tcase_add_test(tc, sign_flip_matches_the_enumeration_and_the_replayed_draws);
  tcase_add_test(tc, sign_flip_of_zero_one_outcomes_is_mcnemar);
  tcase_add_test(tc, auc_of_separated_reversed_and_tied_classes);
  tcase_add_test(tc, auc_equals_the_count_over_all_pairs);
  tcase_add_test(tc, mcnemar_power_matches_the_enumeration_of_every_outcome);
  tcase_add_test(tc, mcnemar_mde_matches_the_bisected_enumeration);
  tcase_add_test(tc, connor_samples_and_holm_match_their_formulas);
  suite_add_tcase(suite, tc);
  test_scratch_begin("eval_stats");
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
