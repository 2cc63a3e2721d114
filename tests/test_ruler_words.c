/* Check suite for prompts/ruler_words.h: RULER's definitions of vt, cwe and
 * fwe checked on the generated texts (chain structure and answers, word
 * repeat counts and numbering, zeta counts), the ICL and few-shot examples,
 * determinism in the seed and growth with the size. The word list is made
 * here (every 4-letter word over a..z from "aaaa", in order), so the suite
 * does not depend on the system's dictionary; tests/test_ruler_words_reference.py
 * checks the same texts independently in Python. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompts/ruler_words.h"
#include "common/obc_error.h"

#define N_TEST_WORDS 3000
#define VT_NOISE \
  "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
#define VT_HEAD \
  "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
#define CWE_HEAD                                                                    \
  "Below is a numbered list of words. In these words, some appear more often than " \
  "others. Memorize the ones that appear most often.\n"

static RulerSources test_sources(void) {
  RulerSources s;
  memset(&s, 0, sizeof s);
  s.words = malloc(N_TEST_WORDS * sizeof *s.words);
  ck_assert_ptr_nonnull(s.words);
  for (size_t i = 0; i < N_TEST_WORDS; i++) {
    s.words[i] = malloc(5);
    ck_assert_ptr_nonnull(s.words[i]);
    for (size_t c = 0, v = i; c < 4; c++, v /= 26) s.words[i][3 - c] = (char)('a' + v % 26);
    s.words[i][4] = '\0';
  }
  s.n_words = N_TEST_WORDS;
  return s;
}

static void test_sources_free(RulerSources *s) {
  for (size_t i = 0; i < s->n_words; i++) free(s->words[i]);
  free(s->words);
}

/* The space-separated words of text (a copy, split in place; *n of them). */
static char **split_words(const char *text, char **copy, size_t *n) {
  *copy = strdup(text);
  ck_assert_ptr_nonnull(*copy);
  size_t cap = 16;
  char **words = malloc(cap * sizeof *words);
  *n = 0;
  for (char *save = NULL, *w = strtok_r(*copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
    if (*n == cap) words = realloc(words, (cap *= 2) * sizeof *words);
    ck_assert_ptr_nonnull(words);
    words[(*n)++] = w;
  }
  return words;
}

static size_t count_of(char **words, size_t n, const char *word) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += !strcmp(words[i], word);
  return c;
}

/* ==== vt ==== */

/* Checks that text (n_noises noise lines and five chain lines) holds RULER's
 * chain: "VAR N1 = V", then "VAR Nj = VAR Nj-1 " in order, distinct names of
 * `letters` capitals, V in range; names (5) and value receive it. */
static void check_vt_chain(const char *text, size_t n_noises, size_t letters,
                           char names[RULER_VT_VARIABLES][16], char *value) {
  char *copy = strdup(text);
  ck_assert_ptr_nonnull(copy);
  size_t noises = 0, j = 0;
  for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    if (!strcmp(line, VT_NOISE)) {
      noises++;
      continue;
    }
    ck_assert_uint_lt(j, RULER_VT_VARIABLES);
    char name[16], previous[16];
    int used = 0;
    if (j == 0) {
      ck_assert_int_eq(sscanf(line, "VAR %15s = %7s%n", name, value, &used), 2);
      long v = strtol(value, NULL, 10);
      ck_assert_int_ge(v, RULER_VT_VALUE_MIN);
      ck_assert_int_lt(v, RULER_VT_VALUE_END);
      ck_assert_uint_eq(strlen(value), 5);
    } else {
      ck_assert_int_eq(sscanf(line, "VAR %15s = VAR %15s%n", name, previous, &used), 2);
      ck_assert_str_eq(previous, names[j - 1]);
      ck_assert_str_eq(line + used, " "); /* RULER's hop ends with a space */
    }
    if (j == 0) ck_assert_str_eq(line + used, "");
    ck_assert_uint_eq(strlen(name), letters);
    for (size_t c = 0; c < letters; c++) ck_assert(name[c] >= 'A' && name[c] <= 'Z');
    for (size_t i = 0; i < j; i++) ck_assert_str_ne(names[i], name);
    snprintf(names[j++], sizeof names[0], "%s", name);
  }
  ck_assert_uint_eq(j, RULER_VT_VARIABLES);
  ck_assert_uint_eq(noises, n_noises);
  free(copy);
}

START_TEST(vt_context_holds_one_five_variable_chain_in_order) {
  RulerSources s = test_sources();
  static const size_t sizes[] = {5, 6, 40, 300};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
    for (uint64_t seed = 0; seed < 20; seed++) {
      RulerText t;
      ck_assert_int_eq(ruler_vt_text(&s, 4096, seed, sizes[k], &t), OBC_OK);
      char names[RULER_VT_VARIABLES][16], value[8];
      check_vt_chain(t.context, sizes[k], RULER_VT_NAME_LETTERS, names, value);
      ck_assert_uint_eq(t.n_answers, RULER_VT_VARIABLES);
      for (size_t j = 0; j < RULER_VT_VARIABLES; j++) ck_assert_str_eq(t.answers[j], names[j]);
      /* The chain never ends the context: every assignment precedes a noise line. */
      size_t n = strlen(t.context);
      ck_assert_uint_ge(n, strlen(VT_NOISE));
      ck_assert_str_eq(t.context + n - strlen(VT_NOISE), VT_NOISE);
      ck_assert_ptr_null(strstr(t.context, ". \n"));
      char expected[512];
      snprintf(expected, sizeof expected,
               "\nQuestion: Find all variables that are assigned the value %s in the text above.",
               value);
      ck_assert_str_eq(t.after, expected);
      snprintf(expected, sizeof expected,
               "Answer: According to the chain(s) of variable assignment in the text above, 5 "
               "variables are assigned the value %s, they are: ",
               value);
      ck_assert_str_eq(t.answer_prefix, expected);
      ruler_text_free(&t);
    }
  test_sources_free(&s);
}
END_TEST

START_TEST(vt_marks_cover_each_assignment) {
  RulerSources s = test_sources();
  RulerText t;
  ck_assert_int_eq(ruler_vt_text(&s, 8192, 7, 50, &t), OBC_OK);
  ck_assert_uint_eq(t.n_marks, RULER_VT_VARIABLES);
  /* The value: the digits after "VAR N1 = " on the first assignment's line. */
  char value[8];
  ck_assert_int_eq(
      sscanf(t.after, "\nQuestion: Find all variables that are assigned the value %7s", value), 1);
  for (size_t j = 0; j < t.n_marks; j++) {
    char name[32], expected[300];
    snprintf(name, sizeof name, "chain_%zu", j + 1);
    ck_assert_str_eq(t.marks[j].name, name);
    if (j == 0)
      snprintf(expected, sizeof expected, "VAR %s = %s", t.answers[0], value);
    else
      snprintf(expected, sizeof expected, "VAR %s = VAR %s", t.answers[j], t.answers[j - 1]);
    ck_assert_uint_eq(t.marks[j].end - t.marks[j].begin, strlen(expected));
    ck_assert_int_eq(memcmp(t.context + t.marks[j].begin, expected, strlen(expected)), 0);
    /* A whole line but for a hop's trailing space. */
    ck_assert(t.marks[j].begin == 0 || t.context[t.marks[j].begin - 1] == '\n');
    ck_assert_int_eq(strncmp(t.context + t.marks[j].end, j == 0 ? "\nT" : " \n", 2), 0);
    ck_assert(j == 0 || t.marks[j].begin > t.marks[j - 1].end);
  }
  ruler_text_free(&t);
  test_sources_free(&s);
}
END_TEST

START_TEST(vt_icl_example_precedes_the_task_with_its_answer) {
  RulerSources s = test_sources();
  for (uint64_t seed = 0; seed < 20; seed++) {
    RulerText t;
    ck_assert_int_eq(ruler_vt_text(&s, 4096, seed, 10, &t), OBC_OK);
    /* before = ICL template with its chain, question, answer prefix and
     * answer, "\n", "\n", then the task's instruction. */
    ck_assert_int_eq(strncmp(t.before, VT_HEAD, strlen(VT_HEAD)), 0);
    size_t n = strlen(t.before);
    ck_assert_uint_gt(n, 2 * strlen(VT_HEAD));
    ck_assert_str_eq(t.before + n - strlen(VT_HEAD) - 2, "\n\n" VT_HEAD);
    char *icl = strndup(t.before + strlen(VT_HEAD), n - 2 * strlen(VT_HEAD) - 2);
    char *question = strstr(icl, "\nQuestion: ");
    ck_assert_ptr_nonnull(question);
    *question = '\0';
    char names[RULER_VT_VARIABLES][16], value[8];
    check_vt_chain(icl, RULER_VT_ICL_NOISES, RULER_VT_ICL_NAME_LETTERS, names, value);
    char expected[512];
    snprintf(expected, sizeof expected,
             "Question: Find all variables that are assigned the value %s in the text above. "
             "Answer: According to the chain(s) of variable assignment in the text above, 5 "
             "variables are assigned the value %s, they are:  %s %s %s %s %s",
             value, value, names[0], names[1], names[2], names[3], names[4]);
    ck_assert_str_eq(question + 1, expected);
    free(icl);
    ruler_text_free(&t);
  }
  test_sources_free(&s);
}
END_TEST

START_TEST(vt_refuses_fewer_noises_than_variables) {
  RulerSources s = test_sources();
  RulerText t;
  ck_assert_int_eq(ruler_vt_text(&s, 4096, 1, 4, &t), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "at least 5"));
  ck_assert_ptr_null(t.context);
  test_sources_free(&s);
}
END_TEST

/* ==== cwe ==== */

/* Checks "1. w 2. w ..." numbering (consecutive from 1) and that each of
 * common (10) occurs common_repeats times and each other word
 * uncommon_repeats times, n_distinct words in all. */
static void check_cwe_list(const char *list, char common[][128], size_t n_distinct,
                           size_t common_repeats, size_t uncommon_repeats) {
  char *copy;
  size_t n;
  char **parts = split_words(list, &copy, &n);
  ck_assert_uint_eq(n % 2, 0);
  size_t n_items = n / 2;
  ck_assert_uint_eq(n_items, 10 * common_repeats + (n_distinct - 10) * uncommon_repeats);
  char **items = malloc(n_items * sizeof *items);
  for (size_t i = 0; i < n_items; i++) {
    char number[32];
    snprintf(number, sizeof number, "%zu.", i + 1);
    ck_assert_str_eq(parts[2 * i], number);
    items[i] = parts[2 * i + 1];
  }
  size_t distinct = 0;
  for (size_t i = 0; i < n_items; i++) {
    int seen = 0;
    for (size_t k = 0; k < i && !seen; k++) seen = !strcmp(items[k], items[i]);
    if (seen) continue;
    distinct++;
    int is_common = 0;
    for (size_t c = 0; c < 10; c++) is_common |= !strcmp(common[c], items[i]);
    ck_assert_uint_eq(count_of(items, n_items, items[i]),
                      is_common ? common_repeats : uncommon_repeats);
  }
  ck_assert_uint_eq(distinct, n_distinct);
  for (size_t c = 0; c < 10; c++)
    ck_assert_uint_eq(count_of(items, n_items, common[c]), common_repeats);
  free(items);
  free(parts);
  free(copy);
}

/* The few-shot example of before: its list, and its answer as words. */
static void check_cwe_example(const char *before, size_t n_distinct, size_t common_repeats,
                              size_t uncommon_repeats) {
  const char *question =
      "\nQuestion: What are the 10 most common words in the above list? "
      "Answer: The top 10 words that appear most often in the list are: ";
  ck_assert_int_eq(strncmp(before, CWE_HEAD, strlen(CWE_HEAD)), 0);
  size_t n = strlen(before);
  ck_assert_str_eq(before + n - strlen(CWE_HEAD) - 1, "\n" CWE_HEAD);
  const char *q = strstr(before, question);
  ck_assert_ptr_nonnull(q);
  char *list = strndup(before + strlen(CWE_HEAD), (size_t)(q - before) - strlen(CWE_HEAD));
  char *answer = strndup(q + strlen(question),
                         (size_t)(before + n - strlen(CWE_HEAD) - 1 - (q + strlen(question))));
  char *copy;
  size_t n_parts;
  char **parts = split_words(answer, &copy, &n_parts);
  ck_assert_uint_eq(n_parts, 20);
  char common[10][128];
  for (size_t i = 0; i < 10; i++) {
    char number[8];
    snprintf(number, sizeof number, "%zu.", i + 1);
    ck_assert_str_eq(parts[2 * i], number);
    snprintf(common[i], sizeof common[i], "%s", parts[2 * i + 1]);
  }
  check_cwe_list(list, common, n_distinct, common_repeats, uncommon_repeats);
  free(parts);
  free(copy);
  free(list);
  free(answer);
}

START_TEST(cwe_repeats_common_words_rulers_counts_at_and_above_4096) {
  RulerSources s = test_sources();
  static const size_t sizes[] = {10, 11, 200};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
    for (uint64_t seed = 0; seed < 5; seed++) {
      RulerText t;
      ck_assert_int_eq(ruler_cwe_text(&s, 4096, seed, sizes[k], &t), OBC_OK);
      ck_assert_uint_eq(t.n_answers, RULER_CWE_COMMON);
      check_cwe_list(t.context, t.answers, sizes[k], 30, 3);
      check_cwe_example(t.before, 40, 10, 3);
      ck_assert_str_eq(t.after, "\nQuestion: What are the 10 most common words in the above list?");
      ck_assert_str_eq(t.answer_prefix,
                       "Answer: The top 10 words that appear most often in the list are:");
      ruler_text_free(&t);
    }
  test_sources_free(&s);
}
END_TEST

START_TEST(cwe_repeats_common_words_rulers_counts_below_4096) {
  RulerSources s = test_sources();
  for (uint64_t seed = 0; seed < 5; seed++) {
    RulerText t;
    ck_assert_int_eq(ruler_cwe_text(&s, 4095, seed, 120, &t), OBC_OK);
    check_cwe_list(t.context, t.answers, 120, 6, 1);
    check_cwe_example(t.before, 20, 3, 1);
    ruler_text_free(&t);
  }
  test_sources_free(&s);
}
END_TEST

START_TEST(cwe_refuses_sizes_the_word_list_cannot_give) {
  RulerSources s = test_sources();
  RulerText t;
  ck_assert_int_eq(ruler_cwe_text(&s, 4096, 1, 9, &t), OBC_EINVAL);
  ck_assert_int_eq(ruler_cwe_text(&s, 4096, 1, N_TEST_WORDS + 1, &t), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "3000 (the word list)"));
  ck_assert_int_eq(ruler_cwe_text(&s, 4096, 1, N_TEST_WORDS, &t), OBC_OK);
  ruler_text_free(&t);
  test_sources_free(&s);
}
END_TEST

/* ==== fwe ==== */

static size_t zeta_count(size_t size, size_t k) {
  return (size_t)((double)size * pow((double)k, -2.0) / (M_PI * M_PI / 6.0));
}

START_TEST(fwe_counts_follow_the_zeta_distribution) {
  RulerSources s = test_sources();
  static const struct {
    size_t length, size;
  } cases[] = {{250, 30}, {4096, 700}, {8192, 1400}, {32768, 5000}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    for (uint64_t seed = 0; seed < 3; seed++) {
      RulerText t;
      ck_assert_int_eq(ruler_fwe_text(&s, cases[c].length, seed, cases[c].size, &t), OBC_OK);
      size_t n_vocab = (cases[c].length - 50) / 50;
      char *copy;
      size_t n;
      char **words = split_words(t.context, &copy, &n);
      /* Distinct codes with their counts; "..." is rank 1. */
      char **codes = malloc(n * sizeof *codes);
      size_t *counts = calloc(n, sizeof *counts), n_codes = 0;
      for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < n_codes && strcmp(codes[k], words[i])) k++;
        if (k == n_codes) codes[n_codes++] = words[i];
        counts[k]++;
      }
      ck_assert_uint_eq(count_of(words, n, "..."), zeta_count(cases[c].size, 1));
      /* The counts of the other codes, sorted down, are rank 2.. of the formula. */
      size_t *others = calloc(n_codes, sizeof *others), n_others = 0;
      for (size_t k = 0; k < n_codes; k++) {
        if (!strcmp(codes[k], "...")) continue;
        ck_assert_uint_eq(strlen(codes[k]), RULER_FWE_CODE_LETTERS);
        for (size_t i = 0; i < RULER_FWE_CODE_LETTERS; i++)
          ck_assert(codes[k][i] >= 'a' && codes[k][i] <= 'z');
        size_t i = n_others++;
        for (; i > 0 && others[i - 1] < counts[k]; i--) others[i] = others[i - 1];
        others[i] = counts[k];
      }
      size_t expected_others = 0;
      for (size_t k = 2; k <= n_vocab; k++) {
        size_t z = zeta_count(cases[c].size, k);
        if (!z) break;
        ck_assert_uint_lt(expected_others, n_others);
        ck_assert_uint_eq(others[expected_others++], z);
      }
      ck_assert_uint_eq(n_others, expected_others);
      /* The answers are the codes of ranks 2, 3, 4. */
      ck_assert_uint_eq(t.n_answers, 3);
      for (size_t a = 0; a < 3; a++)
        ck_assert_uint_eq(count_of(words, n, t.answers[a]), zeta_count(cases[c].size, a + 2));
      ck_assert_str_eq(t.before,
                       "Read the following coded text and track the frequency of each coded word. "
                       "Find the three most frequently appeared coded words. ");
      ck_assert_str_eq(t.after,
                       "\nQuestion: Do not provide any explanation. Please ignore the dots "
                       "'....'. What are the three most frequently appeared words in the above "
                       "coded text?");
      ck_assert_str_eq(t.answer_prefix,
                       "Answer: According to the coded text above, the three "
                       "most frequently appeared words are:");
      free(others);
      free(counts);
      free(codes);
      free(words);
      free(copy);
      ruler_text_free(&t);
    }
  test_sources_free(&s);
}
END_TEST

START_TEST(fwe_answers_are_the_three_most_frequent_codes) {
  RulerSources s = test_sources();
  for (uint64_t seed = 0; seed < 10; seed++) {
    RulerText t;
    ck_assert_int_eq(ruler_fwe_text(&s, 4096, seed, 700, &t), OBC_OK);
    char *copy;
    size_t n;
    char **words = split_words(t.context, &copy, &n);
    size_t third = count_of(words, n, t.answers[2]);
    for (size_t i = 0; i < n; i++) {
      if (!strcmp(words[i], "...") || !strcmp(words[i], t.answers[0]) ||
          !strcmp(words[i], t.answers[1]) || !strcmp(words[i], t.answers[2]))
        continue;
      ck_assert_uint_lt(count_of(words, n, words[i]), third);
    }
    ck_assert_uint_gt(count_of(words, n, t.answers[0]), count_of(words, n, t.answers[1]));
    ck_assert_uint_gt(count_of(words, n, t.answers[1]), third);
    free(words);
    free(copy);
    ruler_text_free(&t);
  }
  test_sources_free(&s);
}
END_TEST

START_TEST(fwe_refuses_lengths_outside_4_to_a_million_codes) {
  RulerSources s = test_sources();
  RulerText t;
  ck_assert_int_eq(ruler_fwe_text(&s, 249, 1, 700, &t), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "at least 4 needed"));
  ck_assert_int_eq(ruler_fwe_text(&s, 10, 1, 700, &t), OBC_EINVAL);
  ck_assert_int_eq(ruler_fwe_text(&s, 4096, 1, 26, &t), OBC_EINVAL);
  ck_assert_int_eq(ruler_fwe_text(&s, (size_t)50 * 1000002, 1, 700, &t), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "at most 1000000"));
  ck_assert_int_eq(ruler_fwe_text(&s, 250, 1, 27, &t), OBC_OK);
  ruler_text_free(&t);
  test_sources_free(&s);
}
END_TEST

/* ==== all three ==== */

static const struct {
  const char *name;
  RulerTextFn generate;
  size_t length, size, larger;
} generators[] = {
    {"vt", ruler_vt_text, 4096, 20, 21},
    {"cwe", ruler_cwe_text, 4096, 50, 51},
    {"cwe", ruler_cwe_text, 2048, 50, 51},
    {"fwe", ruler_fwe_text, 4096, 700, 760},
};

START_TEST(same_seed_same_bytes_other_seed_other_text) {
  RulerSources s = test_sources();
  for (size_t g = 0; g < sizeof generators / sizeof *generators; g++) {
    RulerText a, b, c;
    ck_assert_int_eq(generators[g].generate(&s, generators[g].length, 3, generators[g].size, &a),
                     OBC_OK);
    ck_assert_int_eq(generators[g].generate(&s, generators[g].length, 3, generators[g].size, &b),
                     OBC_OK);
    ck_assert_int_eq(generators[g].generate(&s, generators[g].length, 4, generators[g].size, &c),
                     OBC_OK);
    ck_assert_str_eq(a.before, b.before);
    ck_assert_str_eq(a.context, b.context);
    ck_assert_str_eq(a.after, b.after);
    ck_assert_str_eq(a.answer_prefix, b.answer_prefix);
    ck_assert_int_eq(memcmp(a.answers, b.answers, sizeof a.answers), 0);
    ck_assert_str_ne(a.context, c.context);
    ck_assert_str_ne(a.answers[0], c.answers[0]);
    ruler_text_free(&a);
    ruler_text_free(&b);
    ruler_text_free(&c);
  }
  test_sources_free(&s);
}
END_TEST

START_TEST(a_larger_size_gives_a_longer_context) {
  RulerSources s = test_sources();
  for (size_t g = 0; g < sizeof generators / sizeof *generators; g++)
    for (uint64_t seed = 0; seed < 5; seed++) {
      RulerText a, b;
      ck_assert_int_eq(
          generators[g].generate(&s, generators[g].length, seed, generators[g].size, &a), OBC_OK);
      ck_assert_int_eq(
          generators[g].generate(&s, generators[g].length, seed, generators[g].larger, &b), OBC_OK);
      ck_assert_uint_gt(strlen(b.context), strlen(a.context));
      ruler_text_free(&a);
      ruler_text_free(&b);
    }
  test_sources_free(&s);
}
END_TEST

START_TEST(seed_depends_on_the_task_name) {
  NiahRandom a, b, c;
  ruler_words_seed(&a, "vt", 5);
  ruler_words_seed(&b, "cwe", 5);
  ruler_words_seed(&c, "vt", 5);
  uint64_t first = niah_random_next(&a);
  ck_assert_uint_ne(first, niah_random_next(&b));
  ck_assert_uint_eq(first, niah_random_next(&c));
}
END_TEST

int main(void) {
  Suite *suite = suite_create("ruler_words");
  TCase *tc = tcase_create("ruler_words");
  tcase_add_test(tc, vt_context_holds_one_five_variable_chain_in_order);
  tcase_add_test(tc, vt_marks_cover_each_assignment);
  tcase_add_test(tc, vt_icl_example_precedes_the_task_with_its_answer);
  tcase_add_test(tc, vt_refuses_fewer_noises_than_variables);
  tcase_add_test(tc, cwe_repeats_common_words_rulers_counts_at_and_above_4096);
  tcase_add_test(tc, cwe_repeats_common_words_rulers_counts_below_4096);
  tcase_add_test(tc, cwe_refuses_sizes_the_word_list_cannot_give);
  tcase_add_test(tc, fwe_counts_follow_the_zeta_distribution);
  tcase_add_test(tc, fwe_answers_are_the_three_most_frequent_codes);
  tcase_add_test(tc, fwe_refuses_lengths_outside_4_to_a_million_codes);
  tcase_add_test(tc, same_seed_same_bytes_other_seed_other_text);
  tcase_add_test(tc, a_larger_size_gives_a_longer_context);
  tcase_add_test(tc, seed_depends_on_the_task_name);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
