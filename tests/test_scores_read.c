/* Check suite for the spelling of a score from a file (scores/scores_read.h
 * and evict/score_file.h): how NAME=file:PATH[:DATASET] splits into its
 * parts (DATASET is the text after the last ':' when it holds no '/'),
 * which NAMEs are refused, and that a policy set from the spelling, and
 * then from NAME alone, is the file row under the user's NAME. Reading
 * the files themselves is tests/test_score_file.sh's. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "evict/policy.h"
#include "evict/score_file.h"
#include "scores/scores_read.h"

static ScoresFileSpec parsed(const char *text) {
  ScoresFileSpec spec;
  ck_assert_int_eq(scores_file_spec_parse("--score", text, &spec), OBC_OK);
  return spec;
}

START_TEST(the_spelling_splits_into_name_path_and_dataset) {
  ScoresFileSpec s = parsed("mine=file:S.h5:obc_vk");
  ck_assert_str_eq(s.name, "mine");
  ck_assert_str_eq(s.path, "S.h5");
  ck_assert_str_eq(s.dataset, "obc_vk");
  s = parsed("a.b-c_1=file:/tmp/x/S.h5");
  ck_assert_str_eq(s.name, "a.b-c_1");
  ck_assert_str_eq(s.path, "/tmp/x/S.h5");
  ck_assert_str_eq(s.dataset, "");
  s = parsed("m=file:dir:1/S.h5"); /* the text after ':' holds a '/': part of PATH */
  ck_assert_str_eq(s.path, "dir:1/S.h5");
  ck_assert_str_eq(s.dataset, "");
  s = parsed("m=file:dir:1/S.h5:oracle@T");
  ck_assert_str_eq(s.path, "dir:1/S.h5");
  ck_assert_str_eq(s.dataset, "oracle@T");
}
END_TEST

START_TEST(bad_names_and_paths_are_refused) {
  static const char *const bad[] = {
      "=file:S.h5",                                 /* no NAME */
      "my score=file:S.h5",                         /* a space */
      "m/x=file:S.h5",                              /* a '/' */
      "abcdefghijabcdefghijabcdefghijab=file:S.h5", /* 32 characters */
      "m=file:",                                    /* no PATH */
      "m=file::obc_vk",                             /* no PATH before DATASET */
      "m=S.h5",                                     /* not file: */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ScoresFileSpec spec;
    ck_assert_msg(scores_file_spec_parse("--score", bad[i], &spec) == OBC_EINVAL, "%s taken",
                  bad[i]);
  }
  ck_assert(!scores_file_spelled("obc_vk"));
  ck_assert(!scores_file_spelled("m=S.h5"));
  ck_assert(scores_file_spelled("m=file:S.h5"));
}
END_TEST

START_TEST(a_policy_takes_the_file_row_under_the_users_name) {
  EvictPolicy p;
  evict_policy_default(&p);
  ck_assert_int_eq(evict_policy_set_score(&p, "mine=file:S.h5:obc_vk"), OBC_OK);
  ck_assert_str_eq(p.score, "mine");
  ck_assert_ptr_eq(p.source, evict_source_file());
  ck_assert_ptr_null(evict_source_find("mine", 4)); /* not a row of the table */
  ck_assert_str_eq(evict_score_file_path("mine"), "S.h5");
  ck_assert_str_eq(evict_score_file_dataset("mine"), "obc_vk");
  /* NAME alone, once recorded, and the same spelling again */
  evict_policy_default(&p);
  ck_assert_int_eq(evict_policy_set_score(&p, "mine"), OBC_OK);
  ck_assert_ptr_eq(p.source, evict_source_file());
  ck_assert_int_eq(evict_policy_set_score(&p, "mine=file:S.h5:obc_vk"), OBC_OK);
  /* NAME for another file, a built-in's name, an unknown NAME */
  ck_assert_int_eq(evict_policy_set_score(&p, "mine=file:T.h5"), OBC_EINVAL);
  ck_assert_int_eq(evict_policy_set_score(&p, "obc_vk=file:S.h5"), OBC_EINVAL);
  ck_assert_int_eq(evict_policy_set_score(&p, "snapkv=file:S.h5"), OBC_EINVAL);
  ck_assert_int_eq(evict_policy_set_score(&p, "file=file:S.h5"), OBC_EINVAL);
  ck_assert_int_eq(evict_policy_set_score(&p, "theirs"), OBC_EINVAL);
  ck_assert_int_eq(evict_policy_set_score(&p, "file"), OBC_EINVAL);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("scores_read");
  TCase *tc = tcase_create("scores_read");
  tcase_add_test(tc, the_spelling_splits_into_name_path_and_dataset);
  tcase_add_test(tc, bad_names_and_paths_are_refused);
  tcase_add_test(tc, a_policy_takes_the_file_row_under_the_users_name);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
