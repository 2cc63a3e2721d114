/* Check suite for rows where one key takes nearly all the attention (an
 * attention sink, 1 - A down to ~1e-7): every exact error and oracle@1 /
 * oracle@T, from the oracle and from the fused sweep, against brute force,
 * when the trace stores lse as float32 and O rounded to float32 or float16
 * (docs/SCIENCE.md, "A key that takes nearly all the attention").
 *
 * The fixture: one layer, one head, d = 16, prompt 64, the last 8
 * prompt rows and 2 decode rows captured; key 0 has a logit ~17-22 in every
 * row, the other keys' logits are small. Q, K, V are rounded to the storage
 * type first, and both sides use the rounded values, so that rounding is
 * shared; O and lse are computed in double from them and rounded as a correct
 * writer would (lse always float32, SCHEMA.md).
 *
 * Tolerance 1% (the requirement). What remains after the shared
 * rounding: the dominant pair is recomputed in double (~1e-12); the other
 * pairs read stored lse (A relative error ~2 |lse| 6e-8 ~ 3e-6) and stored O
 * (f16: ~5e-4 per component against ||v_p - o|| ~ 1, so ~1e-3 on the error);
 * FLOAT rounds the GEMM inputs (~1e-5). 1% leaves a margin of 10 over the worst.
 * Before the recomputation, oracle@1 at position 0 came out 10x too small
 * (0.0865 against 0.828 with 1 - A ~ 4e-7 and f32 storage). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_startup.h"
#include "scores/scores.h"
#include "common/obc_error.h"
#include "fixture_attention.h"
#include "oracle/oracle.h"
#include "traces/trace_h5.h"

enum { STORE_F32, STORE_F16 };

static const double tolerance = 1e-2;

/* x rounded to the storage type. */
static double stored(double x, int storage) {
  float f = (float)x;
  if (storage == STORE_F16) f = trace_h5_float_from_half(trace_h5_half_from_float(f));
  return f;
}

/* lse and O of every captured row from Q, K, V in double (fixture_output). */
static void recompute_outputs(FixtureProblem *t) {
  size_t d = t->head.head_dim, n_rows = t->head.n_rows;
  for (size_t r = 0; r < n_rows; r++) {
    size_t pos = (size_t)t->positions[r];
    const double *q = t->Q + r * d;
    fixture_output(t, q, pos, FIX_NONE, 0, t->O + r * d);
    double zmax = -HUGE_VAL, total = 0.0;
    for (size_t k = 0; k <= pos; k++) {
      double z = t->head.attn_scale * fixture_dot(q, t->K + k * d, d);
      zmax = z > zmax ? z : zmax;
    }
    for (size_t k = 0; k <= pos; k++)
      total += exp(t->head.attn_scale * fixture_dot(q, t->K + k * d, d) - zmax);
    t->lse[r] = zmax + log(total);
  }
}

/* The fixture with key 0 dominating every captured row so that
 * 1 - A ~ one_minus_a in the last prompt row. Every q has the same component
 * beta along the unit direction u of k_0 (the rest of q is orthogonal to u),
 * so z_0 is the same in every row; the other keys are scaled by 0.2. */
static void make_dominant(FixtureProblem *t, double one_minus_a, int storage) {
  size_t s = 64, T = 2, d = 16;
  fixture_make(t, 1, s, T, d, 1, 8);
  size_t n_pos = t->head.n_positions, n_rows = t->head.n_rows;
  double u[16], norm = 0.0;
  for (size_t c = 0; c < d; c++) {
    u[c] = fixture_normal();
    norm += u[c] * u[c];
  }
  for (size_t c = 0; c < d; c++) u[c] /= sqrt(norm);
  for (size_t p = 1; p < n_pos; p++)
    for (size_t c = 0; c < d; c++) t->K[p * d + c] *= 0.2;
  double beta = 3.0;
  for (size_t r = 0; r < n_rows; r++) {
    double *q = t->Q + r * d, along = fixture_dot(q, u, d);
    for (size_t c = 0; c < d; c++) q[c] += (beta - along) * u[c];
  }
  /* m = sum_{j >= 1} exp(z_j - z_0) = one_minus_a / (1 - one_minus_a) in the
   * last prompt row fixes z_0. */
  const double *q_last = t->Q + (n_rows - T - 1) * d;
  double sum_other = 0.0;
  for (size_t p = 1; p < s; p++)
    sum_other += exp(t->head.attn_scale * fixture_dot(q_last, t->K + p * d, d));
  double z0 = log(sum_other * (1.0 - one_minus_a) / one_minus_a);
  for (size_t c = 0; c < d; c++) t->K[c] = z0 / (t->head.attn_scale * beta) * u[c];
  for (size_t i = 0; i < n_pos * d; i++) {
    t->K[i] = stored(t->K[i], storage);
    t->V[i] = stored(t->V[i], storage);
  }
  for (size_t i = 0; i < n_rows * d; i++) t->Q[i] = stored(t->Q[i], storage);
  recompute_outputs(t);
  for (size_t i = 0; i < n_rows * d; i++) t->O[i] = stored(t->O[i], storage);
  for (size_t r = 0; r < n_rows; r++) t->lse[r] = (float)t->lse[r];
}

static const char *storage_name(int storage) { return storage == STORE_F16 ? "f16" : "f32"; }

/* 1 - A of key 0 in the last prompt row, from the vectors in double. */
static double fixture_one_minus_a(const FixtureProblem *t) {
  size_t d = t->head.head_dim, r = t->head.n_rows - 3;
  const double *q = t->Q + r * d;
  double z0 = t->head.attn_scale * fixture_dot(q, t->K, d), m = 0.0;
  for (size_t p = 1; p <= (size_t)t->positions[r]; p++)
    m += exp(t->head.attn_scale * fixture_dot(q, t->K + p * d, d) - z0);
  return m / (1.0 + m);
}

/* Failures are counted, not asserted at once, so that one run prints every
 * quantity that is off (fixture_rel_error prints both sides). */
static int failures;
static double worst; /* printed at the end (the report's accuracy figure) */

static void check_close(const double *got, const double *ref, size_t s, const char *what) {
  double err = fixture_rel_error(got, ref, s, tolerance, what);
  worst = err > worst ? err : worst;
  if (!(err <= tolerance)) {
    failures++;
    fprintf(stderr, "  position 0: got %.6g, brute force %.6g\n", got[0], ref[0]);
  }
}

/* oracle@1, oracle@T and the window errors of the oracle, in both precisions. */
static void check_oracle(double one_minus_a, int storage) {
  FixtureProblem t;
  make_dominant(&t, one_minus_a, storage);
  size_t s = t.head.n_prompt, T = 2, first = t.head.n_rows - T;
  double got[64], ref[64];
  char what[128];
  double measured = fixture_one_minus_a(&t);
  ck_assert_msg(measured > 0.3 * one_minus_a && measured < 3.0 * one_minus_a,
                "fixture: 1 - A = %g, wanted ~%g", measured, one_minus_a);
  for (int precision = 0; precision < 2; precision++) {
    for (size_t steps = 1; steps <= T; steps++) {
      fixture_exact_error(&t, first, first + steps, FIX_REMOVE, ref);
      ck_assert_int_eq(oracle_eviction_error(&t.head, 1, steps, precision, got), 0);
      snprintf(what, sizeof what, "oracle@%zu 1-A %g %s %s", steps, one_minus_a,
               storage_name(storage), precision == OBC_PRECISION_DOUBLE ? "double" : "float");
      check_close(got, ref, s, what);
    }
    static const struct {
      OracleExactKind kind;
      int mode;
      const char *name;
    } kinds[] = {{OBC_EXACT_REMOVE, FIX_REMOVE, "remove"},
                 {OBC_EXACT_K, FIX_ZERO_K, "exact_k"},
                 {OBC_EXACT_VK, FIX_ZERO_VK, "exact_vk"}};
    for (size_t k = 0; k < 3; k++) {
      fixture_exact_error(&t, first - 8, first, kinds[k].mode, ref);
      ck_assert_int_eq(oracle_window_error(&t.head, 8, kinds[k].kind, precision, got), 0);
      snprintf(what, sizeof what, "oracle %s W 8 1-A %g %s %s", kinds[k].name, one_minus_a,
               storage_name(storage), precision == OBC_PRECISION_DOUBLE ? "double" : "float");
      check_close(got, ref, s, what);
    }
  }
  fixture_free(&t);
  ck_assert_msg(failures == 0, "%d quantities off by more than 1%%", failures);
}

/* The fused sweep's exact errors and Taylor scores, windows 1 and 8. */
static void check_sweep(double one_minus_a, int storage) {
  FixtureProblem t;
  make_dominant(&t, one_minus_a, storage);
  size_t s = t.head.n_prompt, windows[2] = {1, 8};
  double *ref = malloc(OBC_Q_COUNT * s * sizeof *ref),
         *out = malloc(2 * OBC_Q_COUNT * s * sizeof *out);
  char what[128];
  ScoreOptions options;
  score_options_default(&options);
  for (int precision = 0; precision < 2; precision++) {
    options.precision = precision;
    ck_assert_msg(score_window_sweep(&t.head, windows, 2, &options, out) == 0, "%s",
                  obc_error_message());
    for (size_t w = 0; w < 2; w++) {
      size_t begin, end;
      fixture_window_rows(&t, windows[w], &begin, &end);
      fixture_exact_error(&t, begin, end, FIX_REMOVE, ref + OBC_Q_REMOVE * s);
      fixture_exact_error(&t, begin, end, FIX_ZERO_K, ref + OBC_Q_EXACT_K * s);
      fixture_exact_error(&t, begin, end, FIX_ZERO_VK, ref + OBC_Q_EXACT_VK * s);
      fixture_scores(&t, windows[w], OBC_GQA_SUM, options.maxpool_kernel, ref);
      static const ScoreQuantity checked[] = {OBC_Q_REMOVE, OBC_Q_EXACT_K, OBC_Q_EXACT_VK,
                                              OBC_Q_OBC_K, OBC_Q_OBC_VK};
      for (size_t k = 0; k < sizeof checked / sizeof checked[0]; k++) {
        snprintf(what, sizeof what, "sweep %s W %zu 1-A %g %s %s", score_quantity_name(checked[k]),
                 windows[w], one_minus_a, storage_name(storage),
                 precision == OBC_PRECISION_DOUBLE ? "double" : "float");
        check_close(out + (w * OBC_Q_COUNT + checked[k]) * s, ref + checked[k] * s, s, what);
      }
    }
  }
  free(ref);
  free(out);
  fixture_free(&t);
  ck_assert_msg(failures == 0, "%d quantities off by more than 1%%", failures);
}

START_TEST(oracle_matches_brute_force_when_one_key_takes_all_but_4e_7) {
  check_oracle(4e-7, STORE_F32);
  check_oracle(4e-7, STORE_F16);
}
END_TEST

START_TEST(oracle_matches_brute_force_when_one_key_takes_all_but_1e_3) {
  check_oracle(1e-3, STORE_F32);
  check_oracle(1e-3, STORE_F16);
}
END_TEST

START_TEST(sweep_matches_brute_force_when_one_key_takes_all_but_4e_7) {
  check_sweep(4e-7, STORE_F32);
  check_sweep(4e-7, STORE_F16);
}
END_TEST

START_TEST(sweep_matches_brute_force_when_one_key_takes_all_but_1e_3) {
  check_sweep(1e-3, STORE_F32);
  check_sweep(1e-3, STORE_F16);
}
END_TEST

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  Suite *suite = suite_create("dominant_key");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, oracle_matches_brute_force_when_one_key_takes_all_but_4e_7);
  tcase_add_test(tc, oracle_matches_brute_force_when_one_key_takes_all_but_1e_3);
  tcase_add_test(tc, sweep_matches_brute_force_when_one_key_takes_all_but_4e_7);
  tcase_add_test(tc, sweep_matches_brute_force_when_one_key_takes_all_but_1e_3);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_set_fork_status(runner, CK_NOFORK);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  printf("dominant key vs brute force: max rel. error %.3g\n", worst);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
