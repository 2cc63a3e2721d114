/* evict/h2o.h: H2O and H2O+OBC scores from a trace's column sums. A
 * synthetic trace with every prompt row captured stores A and its column
 * sums (computed in double by synth), so the brute-force twins are the two
 * formulas on the stored A: accumulated (the H2O paper), the sum over each
 * KV head's query heads of sum_{i >= p} A_ip; observed (kvpress), the mean
 * over them of sum_{i >= p} A_ip / (n - p). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "evict/h2o.h"
#include "tests/test_env.h"
#include "traces/synth.h"
#include "traces/trace.h"

static void synth_full_rows(const char *path, bool column_sums) {
  SynthOptions o;
  synth_options_default(&o);
  o.n_prompt_rows = o.n_prompt; /* every prompt row: the sums and their twin */
  o.store_attn = true;
  o.store_column_sums = column_sums;
  ck_assert_msg(synth_generate(&o, path) == 0, "%s", obc_error_message());
}

/* Both stored in float32: A (2^-24 relative each) and the sum (2^-24), so
 * the score from the stored sum and the one from the stored A differ by at
 * most 2^-23 relative, plus the double arithmetic of both. */
#define H2O_TOLERANCE (2.0 * 0x1p-24 + 1e-12)

START_TEST(h2o_scores_are_the_accumulated_and_the_observed_attention_of_every_prompt_row) {
  char path[4096];
  test_scratch_file("h2o.h5", path, sizeof path);
  synth_full_rows(path, true);
  TraceReader *r = NULL;
  ck_assert_int_eq(trace_open(path, &r), 0);
  const TraceMeta *m = trace_meta(r);
  size_t heads = m->model.n_heads, kv_heads = m->model.n_kv_heads, group = heads / kv_heads;
  size_t P = m->n_positions, s = m->n_prompt;
  float *A = malloc(m->n_rows * P * sizeof *A);
  double *mine = malloc(kv_heads * s * sizeof *mine), *want = calloc(kv_heads * s, sizeof *want);
  ck_assert(A && mine && want);
  for (size_t layer = 0; layer < m->model.n_layers; layer++)
    for (int v = 0; v < TRACE_ROWS_VARIANTS; v++)
      for (int form = H2O_ACCUMULATED; form <= H2O_OBSERVED; form++) {
        size_t n = v == TRACE_ROWS_AGNOSTIC ? m->agnostic_rows : s; /* rows [0, n) */
        ck_assert_msg(h2o_scores(r, layer, n, (TraceSumRows)v, H2O_ATTN, (H2oForm)form, mine) == 0,
                      "%s", obc_error_message());
        memset(want, 0, kv_heads * s * sizeof *want);
        for (size_t h = 0; h < heads; h++) {
          ck_assert_int_eq(trace_read_attn(r, layer, h, A), 0);
          for (size_t p = 0; p < n; p++) {
            double column = 0.0;
            for (size_t i = p; i < n; i++) column += A[i * P + p]; /* row i is position i */
            want[h / group * n + p] +=
                form == H2O_ACCUMULATED ? column : column / (double)(n - p) / (double)group;
          }
        }
        for (size_t i = 0; i < kv_heads * n; i++)
          ck_assert_msg(fabs(mine[i] - want[i]) <= H2O_TOLERANCE * want[i],
                        "layer %zu, rows %d, form %d, KV head %zu, position %zu: %.12g vs %.12g",
                        layer, v, form, i / n, i % n, mine[i], want[i]);
      }
  free(A), free(mine), free(want);
  trace_close(r);
}
END_TEST

START_TEST(h2o_refuses_positions_no_row_saw_and_traces_without_sums) {
  char path[4096];
  test_scratch_file("h2o-refused.h5", path, sizeof path);
  synth_full_rows(path, true);
  TraceReader *r = NULL;
  ck_assert_int_eq(trace_open(path, &r), 0);
  const TraceMeta *m = trace_meta(r);
  double *out = malloc(m->model.n_kv_heads * m->n_prompt * sizeof *out);
  ck_assert_ptr_nonnull(out);
  /* the agnostic rows never saw the question: no score for it */
  ck_assert_int_eq(
      h2o_scores(r, 0, m->agnostic_rows + 1, TRACE_ROWS_AGNOSTIC, H2O_OBC_K, H2O_ACCUMULATED, out),
      OBC_EINVAL);
  ck_assert(strstr(obc_error_message(), path));
  ck_assert_int_eq(h2o_scores(r, 0, m->n_prompt, TRACE_ROWS_ALL, H2O_OBC_VK, H2O_OBSERVED, out), 0);
  trace_close(r);
  synth_full_rows(path, false);
  ck_assert_int_eq(trace_open(path, &r), 0);
  ck_assert_int_eq(h2o_scores(r, 0, 1, TRACE_ROWS_ALL, H2O_ATTN, H2O_ACCUMULATED, out),
                   OBC_ENOTFOUND);
  ck_assert(strstr(obc_error_message(), "no column sums"));
  ck_assert(strstr(obc_error_message(), path));
  trace_close(r);
  free(out);
}
END_TEST

static Suite *h2o_suite(void) {
  Suite *s = suite_create("h2o");
  TCase *tc = tcase_create("h2o");
  tcase_add_test(tc, h2o_scores_are_the_accumulated_and_the_observed_attention_of_every_prompt_row);
  tcase_add_test(tc, h2o_refuses_positions_no_row_saw_and_traces_without_sums);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  (void)argc;
  obc_startup_defaults(argv);
  test_scratch_begin("h2o");
  SRunner *runner = srunner_create(h2o_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
