/* Check suite of prompts/ruler_task.c, the frame around RULER's task texts,
 * with the default model's tokenizer (OBC_MODEL): the task table, the length
 * search (the size found fits with tokens_to_generate and the next one does
 * not, checked against the generator and the tokenizer directly; fwe's
 * size RULER's steps, replayed the same way), the essay
 * needles at RULER's depths, the one-line
 * failure when nothing fits, the chat template, and determinism (the same
 * inputs give the same ids, another seed another prompt). */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prompts/ruler_task.h"
#include "common/obc_error.h"
#include "formats/gguf.h"
#include "tests/test_env.h"

static Tokenizer *tokenizer; /* loaded once in main, shared by the tests */
static RulerSources sources;

static RulerOptions options_plain(void) {
  RulerOptions o;
  ruler_options_default(&o);
  o.no_chat_template = true;
  return o;
}

static void build_ok(const char *name, size_t length, uint64_t seed, const RulerOptions *o,
                     RulerSample *out) {
  const RulerTask *task = ruler_task_find(name);
  ck_assert_ptr_nonnull(task);
  int rc = ruler_sample_build(tokenizer, &sources, o, task, length, seed, out);
  ck_assert_msg(rc == 0, "%s at %zu: %s", name, length, obc_error_message());
}

/* Tokens of RULER's base-template prompt (user turn, a space, the answer
 * prefix) of the task's text at `size`, tokenized in one go. */
static size_t plain_tokens_at(const RulerTask *task, size_t length, uint64_t seed, size_t size) {
  RulerText t;
  ck_assert_int_eq(task->generate(&sources, length, seed, size, &t), 0);
  size_t n = strlen(t.before) + strlen(t.context) + strlen(t.after) + strlen(t.answer_prefix) + 2;
  char *text = malloc(n);
  ck_assert_ptr_nonnull(text);
  snprintf(text, n, "%s%s%s %s", t.before, t.context, t.after, t.answer_prefix);
  int32_t *ids = NULL;
  size_t n_ids = 0;
  ck_assert_int_eq(tokenizer_encode(tokenizer, text, strlen(text), &ids, &n_ids), 0);
  size_t bos = tokenizer_adds_bos(tokenizer) && tokenizer_bos_id(tokenizer) >= 0 ? 1 : 0;
  free(ids);
  free(text);
  ruler_text_free(&t);
  return n_ids + bos;
}

START_TEST(test_the_table_lists_rulers_niah_tasks_in_order) {
  static const char *const names[] = {"niah_single_1",   "niah_single_2",   "niah_single_3",
                                      "niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
                                      "niah_multivalue", "niah_multiquery"};
  size_t n = sizeof names / sizeof *names;
  ck_assert_uint_ge(ruler_task_count(), n);
  for (size_t i = 0; i < n; i++) {
    const RulerTask *task = ruler_task_at(i);
    ck_assert_str_eq(task->name, names[i]);
    ck_assert_str_eq(task->ruler_task, "niah");
    ck_assert_uint_eq(task->tokens_to_generate, 128);
    ck_assert_ptr_eq(ruler_task_find(names[i]), task);
  }
  ck_assert_ptr_null(ruler_task_at(ruler_task_count()));
  ck_assert_ptr_null(ruler_task_find("niah_single_4"));
}
END_TEST

START_TEST(test_the_size_found_fits_and_the_next_does_not) {
  static const char *const names[] = {"niah_single_1", "niah_single_3", "niah_multikey_2",
                                      "niah_multivalue"};
  RulerOptions o = options_plain();
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    for (size_t length = 400; length <= 1600; length += 600) {
      const RulerTask *task = ruler_task_find(names[i]);
      RulerSample s;
      build_ok(names[i], length, 3, &o, &s);
      size_t budget = length - task->tokens_to_generate;
      ck_assert_msg(s.prompt.n_tokens <= budget, "%s: %zu tokens", names[i], s.prompt.n_tokens);
      ck_assert_uint_eq(plain_tokens_at(task, length, 3, s.size), s.prompt.n_tokens);
      size_t next = plain_tokens_at(task, length, 3, s.size + 1);
      ck_assert_msg(next > budget, "%s at %zu: size %zu + 1 takes %zu <= %zu", names[i], length,
                    s.size, next, budget);
      ck_assert_uint_eq(s.next_tokens, next);
      ck_assert(s.prompt.boundary_consistent);
      ruler_sample_free(&s);
    }
}
END_TEST

/* fwe's size as RULER's freq_words_extraction.py fits it, replayed with the
 * generator and the tokenizer directly: from max_len // 6 words, grow by
 * max_len // 32 while the run's sample is under max_len, step back once, then
 * step down while this sample is over it. */
static size_t ruler_fwe_size(size_t length, uint64_t seed, uint64_t run_seed) {
  const RulerTask *task = ruler_task_find("fwe");
  size_t max_len = length - task->tokens_to_generate, incremental = max_len / 32;
  size_t words = max_len / 6;
  while (plain_tokens_at(task, length, run_seed, words) < max_len) words += incremental;
  words -= incremental;
  while (plain_tokens_at(task, length, seed, words) > max_len) words -= incremental;
  return words;
}

START_TEST(test_fwe_fits_in_rulers_steps_once_per_run) {
  static const size_t lengths[] = {600, 1500, 4096};
  static const uint64_t runs[][2] = {{3, 3}, {3, 11}, {5, 11}}; /* (seed, run seed) */
  const RulerTask *task = ruler_task_find("fwe");
  for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
      RulerOptions o = options_plain();
      o.run_seed = runs[r][1];
      o.has_run_seed = true;
      RulerSample s;
      build_ok("fwe", lengths[i], runs[r][0], &o, &s);
      size_t want = ruler_fwe_size(lengths[i], runs[r][0], runs[r][1]);
      ck_assert_msg(s.size == want, "fwe at %zu, seed %llu, run seed %llu: size %zu, RULER's %zu",
                    lengths[i], (unsigned long long)runs[r][0], (unsigned long long)runs[r][1],
                    s.size, want);
      ck_assert_uint_le(s.prompt.n_tokens, lengths[i] - task->tokens_to_generate);
      ck_assert_uint_eq(plain_tokens_at(task, lengths[i], runs[r][0], s.size), s.prompt.n_tokens);
      ruler_sample_free(&s);
    }
}
END_TEST

START_TEST(test_a_length_nothing_fits_fails_with_one_line) {
  RulerOptions o;
  ruler_options_default(&o);
  RulerSample s;
  memset(&s, 0xff, sizeof s);
  int rc =
      ruler_sample_build(tokenizer, &sources, &o, ruler_task_find("niah_multivalue"), 200, 1, &s);
  ck_assert_int_eq(rc, OBC_EINVAL);
  const char *message = obc_error_message();
  ck_assert_msg(strstr(message, "niah_multivalue") && strstr(message, "--length 200"), "%s",
                message);
  ck_assert_ptr_null(strchr(message, '\n'));
  ck_assert_ptr_null(s.prompt.tokens);
  ck_assert_ptr_null(s.user);
  NiahPrompt p;
  ck_assert_int_eq(
      ruler_task_build(tokenizer, &sources, &o, ruler_task_find("niah_single_1"), 128, 1, &p),
      OBC_EINVAL);
  ck_assert_ptr_null(p.tokens);
}
END_TEST

START_TEST(test_the_chat_template_counts_toward_the_length) {
  RulerOptions chat;
  ruler_options_default(&chat);
  RulerOptions plain = options_plain();
  RulerSample a, b;
  build_ok("niah_single_2", 1024, 1, &chat, &a);
  build_ok("niah_single_2", 1024, 1, &plain, &b);
  /* The template's tokens are in the count: with them the next size does
   * not fit, and the haystack is no larger than without them. */
  const RulerTask *task = ruler_task_find("niah_single_2");
  size_t template_tokens = a.prompt.n_tokens - plain_tokens_at(task, 1024, 1, a.size);
  ck_assert_uint_gt(template_tokens, 10);
  ck_assert_uint_le(a.prompt.n_tokens, 1024 - 128);
  ck_assert_uint_gt(plain_tokens_at(task, 1024, 1, a.size + 1) + template_tokens, 1024 - 128);
  ck_assert_uint_le(a.size, b.size);
  ck_assert(a.prompt.boundary_consistent);
  ck_assert_ptr_nonnull(strstr(a.prompt.text, a.user));
  /* The answer prefix opens the assistant's turn and ends the prompt. */
  size_t n = strlen(a.answer_prefix), m = strlen(a.prompt.text);
  ck_assert_str_eq(a.prompt.text + m - n, a.answer_prefix);
  ck_assert_ptr_null(strstr(b.prompt.text, "<|im_start|>"));
  ruler_sample_free(&a);
  ruler_sample_free(&b);
}
END_TEST

START_TEST(test_same_inputs_same_ids_other_seed_other_prompt_consistent_cuts) {
  RulerOptions o;
  ruler_options_default(&o);
  for (size_t i = 0; i < ruler_task_count(); i++) {
    const char *name = ruler_task_at(i)->name;
    RulerSample a, b, c;
    build_ok(name, 1500, 11, &o, &a);
    build_ok(name, 1500, 11, &o, &b);
    build_ok(name, 1500, 12, &o, &c);
    ck_assert_uint_eq(a.prompt.n_tokens, b.prompt.n_tokens);
    ck_assert(!memcmp(a.prompt.tokens, b.prompt.tokens, a.prompt.n_tokens * sizeof(int32_t)));
    ck_assert_str_eq(a.prompt.text, b.prompt.text);
    ck_assert_msg(strcmp(a.user, c.user) != 0, "%s: seeds 11 and 12 give one prompt", name);
    ck_assert_str_ne(a.prompt.answers[0], c.prompt.answers[0]);
    /* the cuts between pieces are where the tokenizer cuts too */
    ck_assert_msg(a.prompt.boundary_consistent && c.prompt.boundary_consistent,
                  "%s: the pieces' ids are not the whole prompt's", name);
    ruler_sample_free(&a);
    ruler_sample_free(&b);
    ruler_sample_free(&c);
  }
}
END_TEST

/* Whether k sentences is int(size * depth / 100) for one of RULER's 40
 * depths, round(linspace(0, 100, 40)). */
static int rulers_position(size_t size, size_t k) {
  for (int i = 0; i < 40; i++) {
    double depth = (double)lround(100.0 * i / 39.0);
    if ((size_t)((double)size * (depth / 100.0)) == k) return 1;
  }
  return 0;
}

START_TEST(test_essay_needles_sit_at_rulers_depths) {
  static const char *const names[] = {"niah_single_2", "niah_multikey_1", "niah_multivalue",
                                      "niah_multiquery"};
  static const size_t sizes[] = {1, 7, 40, 123};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++)
      for (uint64_t seed = 1; seed <= 3; seed++) {
        RulerText t;
        ck_assert_int_eq(ruler_task_find(names[i])->generate(&sources, 4096, seed, sizes[j], &t),
                         0);
        /* Walk the context: essay sentences in order, the needles between. */
        size_t at = 0, sentences = 0, needles = 0;
        for (size_t m = 0; m <= t.n_marks; m++) {
          if (m < t.n_marks && strstr(t.marks[m].name, "value")) continue;
          size_t until = m < t.n_marks ? t.marks[m].begin : strlen(t.context);
          while (at < until) {
            size_t length;
            const char *sentence = niah_haystack_sentence(&sources.essay, sentences, &length);
            ck_assert_msg(!strncmp(t.context + at, sentence, length), "%s: sentence %zu at %zu",
                          names[i], sentences, at);
            at += length + 1; /* and the space */
            sentences++;
          }
          if (m == t.n_marks) break;
          ck_assert_msg(rulers_position(sizes[j], sentences), "%s size %zu: a needle after %zu",
                        names[i], sizes[j], sentences);
          ck_assert(!strncmp(t.context + t.marks[m].begin, "One of the special magic ", 25));
          at = t.marks[m].end + 1;
          needles++;
        }
        ck_assert_uint_eq(sentences, sizes[j]);
        ck_assert_uint_eq(needles, t.n_marks / 2);
        ruler_text_free(&t);
      }
}
END_TEST

START_TEST(test_the_json_holds_the_sample) {
  RulerOptions o;
  ruler_options_default(&o);
  const RulerTask *task = ruler_task_find("niah_multiquery");
  RulerSample s;
  build_ok(task->name, 700, 5, &o, &s);
  cJSON *json = NULL;
  ck_assert_int_eq(ruler_prompt_json(task, 700, 5, &s, &json), 0);
  ck_assert_str_eq(cJSON_GetObjectItem(json, "task")->valuestring, "niah_multiquery");
  ck_assert_int_eq(cJSON_GetObjectItem(json, "tokens")->valueint, (int)s.prompt.n_tokens);
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(json, "ids")), (int)s.prompt.n_tokens);
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(json, "answers")), 4);
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(json, "spans")), (int)s.prompt.n_spans);
  ck_assert_str_eq(cJSON_GetObjectItem(json, "user")->valuestring, s.user);
  cJSON_Delete(json);
  ruler_sample_free(&s);
}
END_TEST

static Suite *ruler_task_suite(void) {
  Suite *s = suite_create("ruler_task");
  TCase *frame = tcase_create("frame");
  tcase_set_timeout(frame, TEST_TIMEOUT_S);
  tcase_add_test(frame, test_the_table_lists_rulers_niah_tasks_in_order);
  tcase_add_test(frame, test_the_size_found_fits_and_the_next_does_not);
  tcase_add_test(frame, test_fwe_fits_in_rulers_steps_once_per_run);
  tcase_add_test(frame, test_a_length_nothing_fits_fails_with_one_line);
  tcase_add_test(frame, test_the_chat_template_counts_toward_the_length);
  tcase_add_test(frame, test_same_inputs_same_ids_other_seed_other_prompt_consistent_cuts);
  tcase_add_test(frame, test_essay_needles_sit_at_rulers_depths);
  tcase_add_test(frame, test_the_json_holds_the_sample);
  suite_add_tcase(s, frame);
  return s;
}

int main(void) {
  const char *path = getenv("OBC_MODEL");
  if (!path || access(path, R_OK)) {
    printf("test_ruler_task: skipped, no model at OBC_MODEL (run scripts/setup.sh)\n");
    return 0;
  }
  GgufFile *file = NULL;
  RulerOptions o;
  ruler_options_default(&o);
  int rc = gguf_open(path, &file);
  if (!rc) rc = tokenizer_from_gguf(file, path, &tokenizer);
  if (file) gguf_close(file);
  if (!rc) rc = ruler_sources_open(&o, &sources);
  if (rc) {
    fprintf(stderr, "test_ruler_task: %s\n", obc_error_message());
    return 1;
  }
  test_scratch_begin("ruler_task");
  SRunner *runner = srunner_create(ruler_task_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  ruler_sources_close(&sources);
  tokenizer_free(tokenizer);
  return test_scratch_end(failed);
}
