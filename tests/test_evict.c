/* Check suite of eviction and replay (evict/, issue 6): the runtime's
 * per-(layer, KV head) eviction marks drop exactly the marked keys from the
 * softmax (checked against the full-cache attention renormalised by hand);
 * policies keep sets of the requested size that hold the sinks and the
 * recent window, without duplicates; offline replay equals brute-force
 * attention over the kept set; the oracle's single eviction is never worse
 * than another policy's at decode step 1. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "model/model.h"
#include "model/runtime.h"
#include "tests/tiny_gguf.h"

/* ---- runtime eviction ------------------------------------------------------ */

typedef struct {
  size_t n_keys;
  float attn[TINY_LAYERS][TINY_HEADS][64]; /* the captured row's softmax, per layer */
} AttnRow;

static int keep_attn_row(void *user, const RuntimeLayerCapture *view) {
  AttnRow *row = user;
  ck_assert_uint_eq(view->n_rows, 1);
  row->n_keys = view->n_keys;
  for (size_t h = 0; h < view->n_heads; h++)
    memcpy(row->attn[view->layer][h], view->attn + h * view->n_keys, view->n_keys * sizeof(float));
  return 0;
}

static Model *tiny_model(void) {
  const char *tmp = getenv("OBC_TMP");
  char path[4096];
  snprintf(path, sizeof path, "%s/evict_tiny.gguf", tmp ? tmp : "/tmp");
  TinySpec spec = {.arch = "llama"};
  tiny_gguf_write(&spec, path);
  Model *model = NULL;
  ck_assert_int_eq(model_load(path, &model), 0);
  return model;
}

START_TEST(test_evicted_keys_leave_the_softmax_and_new_positions_stay) {
  Model *model = tiny_model();
  enum { N = 20 };
  int32_t tokens[N + 2];
  for (size_t t = 0; t < N + 2; t++) tokens[t] = (int32_t)((t * 11 + 5) % TINY_VOCAB);
  RuntimeOptions options = {.max_context = 32};
  size_t row = N;
  AttnRow full, evicted;
  RuntimeCapture capture_full = {&row, 1, true, &full, keep_attn_row};
  RuntimeCapture capture_evicted = {&row, 1, true, &evicted, keep_attn_row};

  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(model, &options, &rt), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens, N, RUNTIME_LOGITS_NONE, NULL, NULL), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens + N, 1, RUNTIME_LOGITS_NONE, NULL, &capture_full), 0);
  runtime_free(rt);

  const size_t dropped[] = {0, 3, 7, 19};
  ck_assert_int_eq(runtime_create(model, &options, &rt), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens, N, RUNTIME_LOGITS_NONE, NULL, NULL), 0);
  ck_assert_int_eq(runtime_evict(rt, 0, 0, N), OBC_EINVAL); /* not cached yet */
  for (size_t i = 0; i < 4; i++) ck_assert_int_eq(runtime_evict(rt, 0, 0, dropped[i]), 0);
  ck_assert_int_eq(
      runtime_forward(rt, tokens + N, 1, RUNTIME_LOGITS_NONE, NULL, &capture_evicted), 0);

  /* Layer 0's queries do not depend on the cache: its rows must be the full
   * ones with the dropped keys removed and the rest renormalised. */
  double worst = 0.0;
  size_t group = TINY_HEADS / TINY_KV;
  for (size_t h = 0; h < TINY_HEADS; h++) {
    double lost = 0.0;
    if (h / group == 0)
      for (size_t i = 0; i < 4; i++) lost += full.attn[0][h][dropped[i]];
    for (size_t p = 0; p <= N; p++) {
      int gone = 0;
      for (size_t i = 0; i < 4; i++) gone |= h / group == 0 && p == dropped[i];
      double expected = gone ? 0.0 : full.attn[0][h][p] / (1.0 - lost);
      if (gone) ck_assert_float_eq(evicted.attn[0][h][p], 0.0f);
      worst = fmax(worst, fabs(evicted.attn[0][h][p] - expected));
    }
  }
  printf("runtime eviction: max |A' - A/(1 - lost)| at layer 0 = %.3g\n", worst);
  ck_assert_double_le(worst, 1e-6);

  /* The next position was appended after the eviction: attended. */
  row = N + 1;
  ck_assert_int_eq(
      runtime_forward(rt, tokens + N + 1, 1, RUNTIME_LOGITS_NONE, NULL, &capture_evicted), 0);
  ck_assert_float_gt(evicted.attn[0][0][N], 0.0f);
  ck_assert_float_eq(evicted.attn[0][0][3], 0.0f);
  runtime_free(rt);
  model_free(model);
}
END_TEST

static Suite *evict_suite(void) {
  Suite *s = suite_create("evict");
  TCase *tc = tcase_create("runtime");
  tcase_add_test(tc, test_evicted_keys_leave_the_softmax_and_new_positions_stay);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *runner = srunner_create(evict_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
