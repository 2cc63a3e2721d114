/* Check suite of batched decoding (runtime/batch.h) on the tiny GGUF model:
 * B sequences with different eviction marks and tokens, decoded together,
 * give the logits of B separate Runtimes with the same marks
 * (runtime_set_kept) fed the same tokens one at a time, within a tolerance
 * derived from fp32 summation; more sequences than one attention block, a
 * reset between passes and the thread count change nothing beyond it; bad
 * calls fail with one line and leave the batch as it was. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "model/model.h"
#include "runtime/batch.h"
#include "runtime/runtime.h"
#include "tests/tiny_gguf.h"
#include "tests/test_env.h"

enum { PROMPT = 20, STEPS = 6, MAX_SEQS = 40 };

/* Relative tolerance of two fp32 evaluations of the same logits that differ
 * only in summation order (batched GEMMs and split attention against one
 * token per forward call). Along the forward pass the reductions are, per
 * layer, the Q/K/V and MLP projections (dim terms each), the output
 * projection (n_heads * head_dim), the down projection (ffn_dim) and
 * attention over at most n_keys keys, then the LM head (dim): N terms in
 * all. The worst case of a sum of n terms, n * 2^-24 * sum|terms|, gives
 * 2 * 2^-24 * N * max|logit| for the real model at 256 keys about 1% of
 * max|logit|, loose enough to pass a replay that ignored the marks of the
 * teacher-forced sequences (its KL error, 0.85, is within 2 * 0.78). Rounding
 * errors of independent operations are zero-mean and add like a random walk:
 * each path's logit error has a standard deviation of about
 * 2^-24 * sqrt(N) * max|logit|, their difference sqrt(2) times that, and we
 * allow 6 standard deviations (docs/SCIENCE.md, "Batched replay"). */
static double logits_tolerance(const ModelConfig *c, size_t n_keys) {
  double per_layer = (double)(c->dim + c->n_heads * c->head_dim + c->ffn_dim + n_keys);
  double n = (double)c->n_layers * per_layer + (double)c->dim;
  return 6.0 * sqrt(2.0) * ldexp(1.0, -24) * sqrt(n);
}

static float max_abs(const float *x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
  return m;
}

/* Marks of sequence b: sequence 1 keeps everything; the others drop every
 * fifth position from the fourth on and a pattern of their own per (layer,
 * KV head), never the first key. A block of sequences without sequence 1
 * (any after the first in a batch of 40) thus drops some keys in all of them, which
 * the batch leaves out of its GEMMs; a block with it keeps every key. */
static void marks(size_t b, size_t layer, size_t g, unsigned char *keep) {
  for (size_t p = 0; p < PROMPT; p++)
    keep[p] =
        b == 1 || p == 0 || (p % 5 != 3 && (p * 7 + b * 5 + layer * 3 + g) % (2 + b % 4) != 0);
}

/* Even sequences read the tokens of sequence 0 (so that only their marks
 * differ), odd ones others. */
static int32_t token_of(size_t b, size_t t) {
  return (int32_t)((b % 2 * 7 + t * 3 + 1) % TINY_VOCAB);
}

/* Runs n sequences batched from a runtime holding the prompt. logits:
 * (STEPS, n, vocab). */
static void run_batch(Runtime *rt, size_t n, size_t max_seqs, float *logits) {
  const ModelConfig *c = &runtime_model(rt)->config;
  RuntimeBatch *batch = NULL;
  ck_assert_int_eq(runtime_batch_create(rt, max_seqs, STEPS, &batch), 0);
  ck_assert_int_eq(runtime_batch_reset(batch, n), 0);
  unsigned char keep[PROMPT];
  for (size_t b = 0; b < n; b++)
    for (size_t l = 0; l < c->n_layers; l++)
      for (size_t g = 0; g < c->n_kv_heads; g++) {
        marks(b, l, g, keep);
        ck_assert_int_eq(runtime_batch_set_kept(batch, b, l, g, keep, PROMPT), 0);
      }
  int32_t tokens[MAX_SEQS];
  for (size_t t = 0; t < STEPS; t++) {
    for (size_t b = 0; b < n; b++) tokens[b] = token_of(b, t);
    ck_assert_int_eq(runtime_batch_forward(batch, tokens, logits + t * n * c->vocab_size), 0);
    ck_assert_uint_eq(runtime_batch_steps(batch), t + 1);
  }
  runtime_batch_free(batch);
}

/* Sequence b alone: its own runtime, the prompt, runtime_set_kept, then one
 * token per forward call. logits: (STEPS, vocab). */
static void run_single(const Model *model, const int32_t *prompt, size_t b, float *logits) {
  const ModelConfig *c = &model->config;
  RuntimeOptions options = {.max_context = PROMPT + STEPS};
  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(model, &options, &rt), 0);
  ck_assert_int_eq(runtime_forward(rt, prompt, PROMPT, RUNTIME_LOGITS_NONE, NULL, NULL), 0);
  unsigned char keep[PROMPT];
  for (size_t l = 0; l < c->n_layers; l++)
    for (size_t g = 0; g < c->n_kv_heads; g++) {
      marks(b, l, g, keep);
      ck_assert_int_eq(runtime_set_kept(rt, l, g, keep, PROMPT), 0);
    }
  for (size_t t = 0; t < STEPS; t++) {
    int32_t token = token_of(b, t);
    ck_assert_int_eq(
        runtime_forward(rt, &token, 1, RUNTIME_LOGITS_LAST, logits + t * c->vocab_size, NULL), 0);
  }
  runtime_free(rt);
}

static Runtime *prompt_runtime(const Model *model, const int32_t *prompt) {
  RuntimeOptions options = {.max_context = PROMPT + STEPS};
  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(model, &options, &rt), 0);
  ck_assert_int_eq(runtime_forward(rt, prompt, PROMPT, RUNTIME_LOGITS_NONE, NULL, NULL), 0);
  return rt;
}

static void fill_prompt(int32_t *prompt) {
  for (size_t p = 0; p < PROMPT; p++) prompt[p] = (int32_t)((p * 11 + 5) % TINY_VOCAB);
}

/* Batched against separate runtimes, for n sequences (n > 16 spans several
 * attention blocks). */
static void check_against_separate(size_t n, const char *arch) {
  char file[64];
  snprintf(file, sizeof file, "batch_tiny_%s.gguf", arch);
  Model *model = tiny_gguf_model_of(file, arch);
  const ModelConfig *c = &model->config;
  size_t vocab = c->vocab_size;
  int32_t prompt[PROMPT];
  fill_prompt(prompt);
  Runtime *rt = prompt_runtime(model, prompt);
  float *batched = malloc(STEPS * n * vocab * sizeof *batched);
  float *single = malloc(STEPS * vocab * sizeof *single);
  float *first = malloc(STEPS * vocab * sizeof *first);
  ck_assert(batched && single && first);
  run_batch(rt, n, n, batched);
  double tol = logits_tolerance(c, PROMPT + STEPS), worst = 0.0, spread = 0.0;
  for (size_t b = 0; b < n; b++) {
    run_single(model, prompt, b, single);
    if (b == 0) memcpy(first, single, STEPS * vocab * sizeof *first);
    for (size_t t = 0; t < STEPS; t++) {
      const float *want = single + t * vocab, *got = batched + (t * n + b) * vocab;
      double scale = max_abs(want, vocab), diff = 0.0, other = 0.0;
      for (size_t i = 0; i < vocab; i++) {
        diff = fmax(diff, fabs((double)got[i] - want[i]));
        other = fmax(other, fabs((double)want[i] - first[t * vocab + i]));
      }
      ck_assert_msg(diff <= tol * scale,
                    "sequence %zu step %zu: batched logits differ by %.3g (tolerance %.3g)", b, t,
                    diff, tol * scale);
      worst = fmax(worst, diff / scale);
      if (token_of(b, t) == token_of(0, t)) spread = fmax(spread, other / scale);
    }
  }
  printf(
      "%s batch of %zu: max relative logit difference to separate runtimes %.3g (tolerance "
      "%.3g); the marks alone move them by up to %.3g\n",
      arch, n, worst, tol, spread);
  /* The marks matter: a batch that ignored them would fail above. */
  ck_assert_double_gt(spread, 10.0 * tol);
  free(batched);
  free(single);
  free(first);
  runtime_free(rt);
  model_free(model);
}

START_TEST(test_batch_equals_separate_runtimes) { check_against_separate(5, "llama"); }
END_TEST

START_TEST(test_batch_of_two_blocks_equals_separate_runtimes) {
  check_against_separate(MAX_SEQS, "llama");
}
END_TEST

/* Qwen2's biases and Qwen3's per-head Q/K norms on the batched path. */
START_TEST(test_qwen_batches_equal_separate_runtimes) {
  check_against_separate(5, "qwen2");
  check_against_separate(5, "qwen3");
}
END_TEST

/* The same sequences: all at once with 1 and 2 threads, and as the first
 * pass of a batch reset from an earlier one with other marks. */
START_TEST(test_batch_thread_count_and_reset_change_nothing_beyond_rounding) {
  Model *model = tiny_gguf_model("batch_tiny.gguf");
  const ModelConfig *c = &model->config;
  size_t n = 9, vocab = c->vocab_size, count = STEPS * n * vocab;
  int32_t prompt[PROMPT];
  fill_prompt(prompt);
  Runtime *rt = prompt_runtime(model, prompt);
  float *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b);
  ck_assert(a && b);
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  run_batch(rt, n, n, a);
  omp_set_num_threads(2);
  run_batch(rt, n, MAX_SEQS, b);
  omp_set_num_threads(threads);
  double tol = logits_tolerance(c, PROMPT + STEPS) * max_abs(a, count), diff = 0.0;
  for (size_t i = 0; i < count; i++) diff = fmax(diff, fabs((double)a[i] - b[i]));
  printf("batch with 1 and 2 threads: max logit difference %.3g (tolerance %.3g)\n", diff, tol);
  ck_assert_double_le(diff, tol);

  /* A reset batch forgets the previous marks and tokens. */
  RuntimeBatch *batch = NULL;
  ck_assert_int_eq(runtime_batch_create(rt, n, STEPS, &batch), 0);
  ck_assert_int_eq(runtime_batch_reset(batch, n), 0);
  unsigned char none[PROMPT] = {0};
  none[0] = 1;
  int32_t tokens[MAX_SEQS];
  for (size_t s = 0; s < n; s++) {
    tokens[s] = (int32_t)s;
    for (size_t l = 0; l < c->n_layers; l++)
      for (size_t g = 0; g < c->n_kv_heads; g++)
        ck_assert_int_eq(runtime_batch_set_kept(batch, s, l, g, none, PROMPT), 0);
  }
  ck_assert_int_eq(runtime_batch_forward(batch, tokens, b), 0);
  ck_assert_int_eq(runtime_batch_forward(batch, tokens, b), 0);
  ck_assert_int_eq(runtime_batch_reset(batch, n), 0);
  ck_assert_uint_eq(runtime_batch_steps(batch), 0);
  unsigned char keep[PROMPT];
  for (size_t s = 0; s < n; s++)
    for (size_t l = 0; l < c->n_layers; l++)
      for (size_t g = 0; g < c->n_kv_heads; g++) {
        marks(s, l, g, keep);
        ck_assert_int_eq(runtime_batch_set_kept(batch, s, l, g, keep, PROMPT), 0);
      }
  for (size_t t = 0; t < STEPS; t++) {
    for (size_t s = 0; s < n; s++) tokens[s] = token_of(s, t);
    ck_assert_int_eq(runtime_batch_forward(batch, tokens, b + t * n * vocab), 0);
  }
  diff = 0.0;
  for (size_t i = 0; i < count; i++) diff = fmax(diff, fabs((double)a[i] - b[i]));
  ck_assert_double_le(diff, tol);
  runtime_batch_free(batch);
  free(a);
  free(b);
  runtime_free(rt);
  model_free(model);
}
END_TEST

START_TEST(test_batch_bad_calls_fail_with_one_line) {
  Model *model = tiny_gguf_model("batch_tiny.gguf");
  const ModelConfig *c = &model->config;
  int32_t prompt[PROMPT];
  fill_prompt(prompt);
  Runtime *rt = prompt_runtime(model, prompt);
  RuntimeBatch *batch = NULL;
  ck_assert_int_eq(runtime_batch_create(rt, 0, STEPS, &batch), OBC_EINVAL);
  ck_assert_int_eq(runtime_batch_create(rt, 2, 1, &batch), 0);
  ck_assert_uint_eq(runtime_batch_max_seqs(batch), 2);
  float logits[2 * TINY_VOCAB];
  int32_t tokens[2] = {1, 2};
  ck_assert_int_eq(runtime_batch_forward(batch, tokens, logits), OBC_EINVAL); /* no reset */
  ck_assert_int_eq(runtime_batch_reset(batch, 3), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "expected 1..2"));
  ck_assert_int_eq(runtime_batch_reset(batch, 2), 0);
  unsigned char keep[PROMPT + 1];
  memset(keep, 1, sizeof keep);
  ck_assert_int_eq(runtime_batch_set_kept(batch, 0, 0, 0, keep, PROMPT + 1), OBC_EINVAL);
  ck_assert_int_eq(runtime_batch_set_kept(batch, 2, 0, 0, keep, PROMPT), OBC_EINVAL);
  ck_assert_int_eq(runtime_batch_set_kept(batch, 0, c->n_layers, 0, keep, PROMPT), OBC_EINVAL);
  tokens[1] = (int32_t)c->vocab_size;
  ck_assert_int_eq(runtime_batch_forward(batch, tokens, logits), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "sequence 1 has token id"));
  ck_assert_uint_eq(runtime_batch_steps(batch), 0);
  tokens[1] = 2;
  ck_assert_int_eq(runtime_batch_forward(batch, tokens, logits), 0);
  ck_assert_int_eq(runtime_batch_forward(batch, tokens, logits), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "beyond the 1"));
  ck_assert_ptr_null(strchr(obc_error_message(), '\n'));
  runtime_batch_free(batch);
  runtime_free(rt);
  model_free(model);
}
END_TEST

static Suite *batch_suite(void) {
  Suite *s = suite_create("batch");
  TCase *tc = tcase_create("batch");
  tcase_add_test(tc, test_batch_equals_separate_runtimes);
  tcase_add_test(tc, test_batch_of_two_blocks_equals_separate_runtimes);
  tcase_add_test(tc, test_qwen_batches_equal_separate_runtimes);
  tcase_add_test(tc, test_batch_thread_count_and_reset_change_nothing_beyond_rounding);
  tcase_add_test(tc, test_batch_bad_calls_fail_with_one_line);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  test_scratch_begin("batch");
  SRunner *runner = srunner_create(batch_suite());
  srunner_set_fork_status(runner, CK_NOFORK); /* OpenMP threads do not survive a fork */
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
