/* Check suite for common/obc_match: the needle-in-the-answer rule that
 * capture (niah_answer_found) and model replay both apply. A value is found
 * anywhere in the answer, ignoring ASCII case; every value must be there; an
 * empty value or none is "not applicable" (-1), never "found", and the two
 * callers agree on it. */
#include <check.h>
#include <string.h>

#include "prompts/niah.h"
#include "common/obc_match.h"

START_TEST(value_found_anywhere_ignoring_case) {
  const char *value[] = {"Blue Seven"};
  ck_assert_int_eq(obc_match_needle("The answer is blue seven.", value, 1), 1);
  ck_assert_int_eq(obc_match_needle("BLUE SEVEN", value, 1), 1);
  ck_assert_int_eq(obc_match_needle("blue seve", value, 1), 0);
  ck_assert_int_eq(obc_match_needle("", value, 1), 0);
  ck_assert_int_eq(obc_match_needle(NULL, value, 1), 0);
  ck_assert(obc_match_holds("x 12345 y", "1234567", 5));
  ck_assert(!obc_match_holds("x 1234 y", "1234567", 5));
}
END_TEST

START_TEST(every_value_must_be_there) {
  const char *values[] = {"4211", "9870"};
  ck_assert_int_eq(obc_match_needle("9870 and 4211", values, 2), 1);
  ck_assert_int_eq(obc_match_needle("only 4211", values, 2), 0);
}
END_TEST

START_TEST(empty_needle_is_never_found) {
  const char *empty[] = {""}, *one_empty[] = {"4211", ""};
  ck_assert(!obc_match_holds("any text", "", 0));
  ck_assert(!obc_match_holds("", "", 0));
  ck_assert_int_eq(obc_match_needle("any text", empty, 1), -1);
  ck_assert_int_eq(obc_match_needle("4211", one_empty, 2), -1);
  ck_assert_int_eq(obc_match_needle("any text", NULL, 0), -1);
}
END_TEST

/* niah_answer_found is the same rule over the prompt's answers (0 where the
 * rule says not applicable: the capture records found or not). */
START_TEST(capture_applies_the_same_rule) {
  NiahPrompt prompt;
  memset(&prompt, 0, sizeof prompt);
  prompt.n_answers = 2;
  strcpy(prompt.answers[0], "Blue");
  strcpy(prompt.answers[1], "7316");
  const char *answers[] = {"blue 7316", "BLUE", "7316 blue!", "", "bl ue 7316"};
  const char *values[] = {prompt.answers[0], prompt.answers[1]};
  for (size_t i = 0; i < sizeof answers / sizeof *answers; i++)
    ck_assert_int_eq(niah_answer_found(&prompt, answers[i]),
                     obc_match_needle(answers[i], values, 2) == 1);
  strcpy(prompt.answers[1], "");
  ck_assert_int_eq(niah_answer_found(&prompt, "blue 7316"), 0);
  prompt.n_answers = 0;
  ck_assert_int_eq(niah_answer_found(&prompt, "blue 7316"), 0);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("match");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, value_found_anywhere_ignoring_case);
  tcase_add_test(tc, every_value_must_be_there);
  tcase_add_test(tc, empty_needle_is_never_found);
  tcase_add_test(tc, capture_applies_the_same_rule);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? 1 : 0;
}
