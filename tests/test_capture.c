/* Check suite of the capture module on the default model (OBC_MODEL): the
 * NIAH builder hits the target length, its spans decode back exactly to the
 * needle, its value and the question, the concatenated segment ids are what
 * the tokenizer gives for the whole text, and the prompt is a function of the
 * seed; capture writes a trace whose logits, K/V and tokens equal a plain run
 * of the runtime without the capture seam, and bad input leaves no file. */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture.h"
#include "prompts/niah.h"
#include "common/obc_startup.h"
#include "corpus/niah_haystack.h"
#include "common/obc_error.h"
#include "runtime/generate.h"
#include "model/model.h"
#include "runtime/runtime.h"
#include "traces/trace.h"
#include "tests/test_env.h"

static Model *model; /* loaded once in main, shared by the tests */

static char *span_text(const NiahPrompt *p, const char *name) {
  const TraceSpan *span = NULL;
  for (size_t i = 0; i < p->n_spans; i++)
    if (!strcmp(p->spans[i].name, name)) span = &p->spans[i];
  ck_assert_msg(span != NULL, "span %s missing", name);
  ck_assert_int_le(0, span->begin);
  ck_assert_int_lt(span->begin, span->end);
  ck_assert_int_le(span->end, (int64_t)p->n_tokens);
  char *text = NULL;
  ck_assert_int_eq(tokenizer_decode(model->tokenizer, p->tokens + span->begin,
                                    (size_t)(span->end - span->begin), &text),
                   0);
  return text;
}

/* text without leading and trailing whitespace, in place. */
static char *trim(char *text) {
  char *p = text;
  while (isspace((unsigned char)*p)) p++;
  size_t n = strlen(p);
  while (n && isspace((unsigned char)p[n - 1])) p[--n] = '\0';
  return p;
}

static void build(NiahOptions *o, NiahPrompt *p) {
  int rc = niah_build(model->tokenizer, o, p);
  ck_assert_msg(rc == 0, "niah_build: %s", obc_error_message());
}

static void check_ruler_prompt(const char *haystack, size_t length, double depth) {
  NiahOptions o;
  niah_options_default(&o);
  o.haystack = haystack;
  o.length = length;
  o.depth = depth;
  o.seed = 7;
  NiahPrompt p;
  build(&o, &p);
  ck_assert_msg(p.n_tokens <= length && p.n_tokens + 3 >= length,
                "%s: %zu tokens for a target of %zu", haystack, p.n_tokens, length);
  ck_assert_msg(p.boundary_consistent, "%s: segment ids differ from the whole text's", haystack);
  char *needle = span_text(&p, "needle"), *value = span_text(&p, "needle_value");
  char *question = span_text(&p, "question");
  char expected[256];
  snprintf(expected, sizeof expected, "is: %s.", p.answers[0]);
  const char *n = trim(needle);
  ck_assert_msg(!strncmp(n, "One of the special magic numbers for ", 37), "needle '%s'", n);
  ck_assert_msg(strlen(n) > strlen(expected) && !strcmp(n + strlen(n) - strlen(expected), expected),
                "needle '%s' does not end with '%s'", n, expected);
  ck_assert_str_eq(trim(value), p.answers[0]);
  ck_assert_str_eq(trim(question), p.question);
  ck_assert_ptr_nonnull(strstr(p.text, n));
  free(needle);
  free(value);
  free(question);
  niah_prompt_free(&p);
}

START_TEST(test_spans_decode_to_needle_value_and_question_on_noise) {
  check_ruler_prompt("noise", 300, 0);
  check_ruler_prompt("noise", 300, 50);
  check_ruler_prompt("noise", 512, 100);
}
END_TEST

START_TEST(test_spans_decode_to_needle_value_and_question_on_the_bible) {
  check_ruler_prompt("kjv", 256, 0);
  check_ruler_prompt("kjv", 512, 33);
  check_ruler_prompt("kjv", 1024, 100);
}
END_TEST

START_TEST(test_same_seed_same_prompt_other_seed_other_needle) {
  NiahOptions o;
  niah_options_default(&o);
  o.length = 400;
  NiahPrompt a, b, c;
  build(&o, &a);
  build(&o, &b);
  o.seed = 2;
  build(&o, &c);
  ck_assert_uint_eq(a.n_tokens, b.n_tokens);
  ck_assert_int_eq(memcmp(a.tokens, b.tokens, a.n_tokens * sizeof *a.tokens), 0);
  ck_assert_str_ne(a.answers[0], c.answers[0]);
  niah_prompt_free(&a);
  niah_prompt_free(&b);
  niah_prompt_free(&c);
}
END_TEST

START_TEST(test_needle_moves_with_depth) {
  NiahOptions o;
  niah_options_default(&o);
  o.length = 600;
  int64_t begin[3];
  double depths[3] = {0, 50, 100};
  for (int i = 0; i < 3; i++) {
    o.depth = depths[i];
    NiahPrompt p;
    build(&o, &p);
    const TraceSpan *context = NULL, *needle = NULL;
    for (size_t k = 0; k < p.n_spans; k++) {
      if (!strcmp(p.spans[k].name, "context")) context = &p.spans[k];
      if (!strcmp(p.spans[k].name, "needle")) needle = &p.spans[k];
    }
    ck_assert(context && needle);
    begin[i] = needle->begin;
    if (i == 0) ck_assert_int_eq(needle->begin, context->begin);
    if (i == 2) ck_assert_int_eq(needle->end, context->end);
    niah_prompt_free(&p);
  }
  ck_assert_int_lt(begin[0], begin[1]);
  ck_assert_int_lt(begin[1], begin[2]);
}
END_TEST

START_TEST(test_multi_value_needles_all_in_the_prompt_and_all_needed) {
  NiahOptions o;
  niah_options_default(&o);
  o.length = 800;
  o.n_needles = 3;
  o.multi_value = true;
  o.value_kind = NIAH_VALUE_UUID;
  NiahPrompt p;
  build(&o, &p);
  ck_assert_uint_eq(p.n_answers, 3);
  const char *names[3] = {"needle_value", "needle_value_2", "needle_value_3"};
  for (int j = 0; j < 3; j++) {
    char *value = span_text(&p, names[j]);
    ck_assert_str_eq(trim(value), p.answers[j]);
    ck_assert_uint_eq(strlen(p.answers[j]), 36);
    free(value);
  }
  char answer[512];
  snprintf(answer, sizeof answer, "%s, %s", p.answers[0], p.answers[2]);
  ck_assert_int_eq(niah_answer_found(&p, answer), 0);
  snprintf(answer, sizeof answer, "%s, %s and %s.", p.answers[2], p.answers[0], p.answers[1]);
  ck_assert_int_eq(niah_answer_found(&p, answer), 1);
  niah_prompt_free(&p);
}
END_TEST

START_TEST(test_custom_needle_spans_and_haystack_file) {
  char path[4096];
  test_scratch_file("capture_haystack.txt", path, sizeof path);
  FILE *fp = fopen(path, "w");
  ck_assert_ptr_nonnull(fp);
  fputs(
      "It was a bright cold day in April.  The clocks were striking thirteen!\n\n"
      "Winston hurried home? He did not look back.\n",
      fp);
  fclose(fp);
  NiahOptions o;
  niah_options_default(&o);
  o.haystack = path;
  o.length = 200;
  o.depth = 40;
  o.needle_text = "The best thing to do in San Francisco is eat a sandwich in Dolores Park.";
  o.question_text = "What is the best thing to do in San Francisco?";
  o.answer_text = "eat a sandwich in Dolores Park";
  NiahPrompt p;
  build(&o, &p);
  ck_assert(p.boundary_consistent);
  char *needle = span_text(&p, "needle"), *value = span_text(&p, "needle_value");
  ck_assert_str_eq(trim(needle), o.needle_text);
  ck_assert_str_eq(trim(value), o.answer_text);
  ck_assert_ptr_nonnull(strstr(p.text, "The clocks were striking thirteen! Winston"));
  free(needle);
  free(value);
  niah_prompt_free(&p);
  o.answer_text = "the Golden Gate";
  ck_assert_int_eq(niah_build(model->tokenizer, &o, &p), OBC_EINVAL);
}
END_TEST

START_TEST(test_bad_depth_and_too_short_length_fail) {
  NiahOptions o;
  niah_options_default(&o);
  NiahPrompt p;
  o.depth = 150;
  ck_assert_int_eq(niah_build(model->tokenizer, &o, &p), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "depth"));
  o.depth = 50;
  o.length = 20;
  ck_assert_int_eq(niah_build(model->tokenizer, &o, &p), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "more than --length 20"));
}
END_TEST

START_TEST(test_sentences_split_at_ends_and_collapse_whitespace) {
  char text[] = "  One (two).\tThree?  \"Four!\" five\n\nsix.";
  NiahHaystack h;
  ck_assert_int_eq(niah_haystack_from_text(text, "inline", NULL, &h), 0);
  ck_assert_uint_eq(h.n_sentences, 4);
  ck_assert_str_eq(h.sentences[0], "One (two).");
  ck_assert_str_eq(h.sentences[1], "Three?");
  ck_assert_str_eq(h.sentences[2], "\"Four!\"");
  ck_assert_str_eq(h.sentences[3], "five six.");
  free(h.sentences);
  free(h.lengths);
}
END_TEST

/* The trace's logits, tokens and K/V equal a run of the runtime without the
 * capture seam (same chunking, so equal bit for bit). */
START_TEST(test_capture_matches_a_run_without_capture) {
  NiahOptions o;
  niah_options_default(&o);
  o.haystack = "noise";
  o.length = 160;
  NiahPrompt p;
  build(&o, &p);
  CaptureOptions co;
  capture_options_default(&co);
  co.rows = 32;
  co.decode = 3;
  co.store_attn = true;
  char path[4096];
  test_scratch_file("capture_seam.h5", path, sizeof path);
  CaptureResult result;
  int rc = capture_run(model, &p, &co, path, &result);
  ck_assert_msg(rc == 0, "capture_run: %s", obc_error_message());

  size_t s = p.n_tokens, T = co.decode, vocab = model->config.vocab_size;
  size_t n = s + T, hd = model->config.head_dim;
  Runtime *rt = NULL;
  RuntimeOptions ro = {.max_context = n};
  ck_assert_int_eq(runtime_create(model, &ro, &rt), 0);
  float *logits = malloc(vocab * sizeof *logits);
  float *plain = malloc(T * vocab * sizeof *plain);
  int32_t *tokens = malloc(n * sizeof *tokens);
  memcpy(tokens, p.tokens, s * sizeof *tokens);
  ck_assert_int_eq(runtime_forward(rt, p.tokens, s, RUNTIME_LOGITS_LAST, logits, NULL), 0);
  for (size_t t = 0; t < T; t++) {
    tokens[s + t] = (int32_t)generate_argmax(logits, vocab);
    ck_assert_int_eq(runtime_forward(rt, &tokens[s + t], 1, RUNTIME_LOGITS_LAST, logits, NULL), 0);
    memcpy(plain + t * vocab, logits, vocab * sizeof *logits);
  }

  TraceReader *reader = NULL;
  rc = trace_open(path, &reader);
  ck_assert_msg(rc == 0, "trace_open: %s", obc_error_message());
  const TraceMeta *m = trace_meta(reader);
  ck_assert_uint_eq(m->n_prompt, s);
  ck_assert_uint_eq(m->n_decode, T);
  ck_assert_uint_eq(m->n_rows, 32 + T);
  ck_assert_int_eq(m->row_positions[0], (int64_t)(s - 32));
  ck_assert_int_eq(memcmp(m->tokens, tokens, n * sizeof *tokens), 0);
  float *traced = malloc(T * vocab * sizeof *traced);
  ck_assert_int_eq(trace_read_logits(reader, traced), 0);
  ck_assert_int_eq(memcmp(traced, plain, T * vocab * sizeof *plain), 0);
  float *K = malloc(n * hd * sizeof *K), *V = malloc(n * hd * sizeof *V);
  const RuntimeCache *cache = runtime_cache(rt);
  size_t last = model->config.n_layers - 1, g = model->config.n_kv_heads - 1;
  ck_assert_int_eq(trace_read_kv(reader, last, g, K, V), 0);
  ck_assert_int_eq(memcmp(K, runtime_cache_k(cache, last, g), n * hd * sizeof *K), 0);
  ck_assert_int_eq(memcmp(V, runtime_cache_v(cache, last, g), n * hd * sizeof *V), 0);
  ck_assert_int_eq(m->needle_found,
                   niah_answer_found(&p, m->generated_text ? m->generated_text : ""));
  trace_close(reader);
  runtime_free(rt);
  free(K);
  free(V);
  free(traced);
  free(plain);
  free(logits);
  free(tokens);
  niah_prompt_free(&p);
  unlink(path);
}
END_TEST

START_TEST(test_capture_beyond_context_or_unwritable_leaves_no_file) {
  NiahOptions o;
  niah_options_default(&o);
  o.haystack = "noise";
  o.length = 150;
  NiahPrompt p;
  build(&o, &p);
  CaptureOptions co;
  capture_options_default(&co);
  co.decode = model->config.context_length; /* prompt + T beyond the context */
  CaptureResult result;
  char path[4096];
  test_scratch_file("capture_too_long.h5", path, sizeof path);
  ck_assert_int_eq(capture_run(model, &p, &co, path, &result), OBC_EINVAL);
  ck_assert_int_ne(access(path, F_OK), 0);
  co.decode = 2;
  ck_assert_int_lt(capture_run(model, &p, &co, "/nonexistent-folder/t.h5", &result), 0);
  niah_prompt_free(&p);
}
END_TEST

static Suite *capture_suite(void) {
  Suite *s = suite_create("capture");
  TCase *niah = tcase_create("niah");
  tcase_add_test(niah, test_sentences_split_at_ends_and_collapse_whitespace);
  tcase_add_test(niah, test_spans_decode_to_needle_value_and_question_on_noise);
  tcase_add_test(niah, test_spans_decode_to_needle_value_and_question_on_the_bible);
  tcase_add_test(niah, test_same_seed_same_prompt_other_seed_other_needle);
  tcase_add_test(niah, test_needle_moves_with_depth);
  tcase_add_test(niah, test_multi_value_needles_all_in_the_prompt_and_all_needed);
  tcase_add_test(niah, test_custom_needle_spans_and_haystack_file);
  tcase_add_test(niah, test_bad_depth_and_too_short_length_fail);
  suite_add_tcase(s, niah);
  TCase *capture = tcase_create("capture");
  tcase_add_test(capture, test_capture_matches_a_run_without_capture);
  tcase_add_test(capture, test_capture_beyond_context_or_unwritable_leaves_no_file);
  suite_add_tcase(s, capture);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  const char *path = getenv("OBC_MODEL");
  if (!path || access(path, R_OK)) {
    printf("test_capture: skipped, no model at OBC_MODEL (run scripts/setup.sh)\n");
    return 0;
  }
  if (model_load(path, &model) || !model->tokenizer) {
    fprintf(stderr, "test_capture: cannot load %s: %s\n", path, obc_error_message());
    return 1;
  }
  test_scratch_begin("capture");
  SRunner *runner = srunner_create(capture_suite());
  /* No fork per test: the model was loaded (and OpenMP's threads started)
   * in this process, and libgomp does not survive a fork. */
  srunner_set_fork_status(runner, CK_NOFORK);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  model_free(model);
  return test_scratch_end(failed);
}
