/* Check suite for sweep/replay_pairs: a score named X+obc_S pairs with the
 * baseline X by name alone (any X, any S: the names here need not be real
 * scores), pairs are found in list order only when both are swept, and
 * --pairs adds each entry and its baseline once. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/obc_error.h"
#include "sweep/replay_pairs.h"

START_TEST(paired_name_gives_its_baseline) {
  char baseline[32];
  ck_assert(sweep_pair_baseline("snapkv+obc_vk", baseline, sizeof baseline));
  ck_assert_str_eq(baseline, "snapkv");
  ck_assert(sweep_pair_baseline("adakv-snapkv+obc_k", baseline, sizeof baseline));
  ck_assert_str_eq(baseline, "adakv-snapkv");
  ck_assert(sweep_pair_baseline("made_up+obc_anything", baseline, sizeof baseline));
  ck_assert_str_eq(baseline, "made_up");
  /* Not pairs: no mark, nothing before or after it. */
  ck_assert(!sweep_pair_baseline("obc_vk", baseline, sizeof baseline));
  ck_assert(!sweep_pair_baseline("+obc_vk", baseline, sizeof baseline));
  ck_assert(!sweep_pair_baseline("snapkv+obc_", baseline, sizeof baseline));
  ck_assert(!sweep_pair_baseline("snapkv+vk", baseline, sizeof baseline));
  /* A baseline that does not fit is no pair (never cut short). */
  ck_assert(!sweep_pair_baseline("snapkv+obc_vk", baseline, 6));
}
END_TEST

START_TEST(pairs_are_found_when_both_are_swept) {
  const char names[][32] = {"h2o",          "tova+obc_v", "snapkv",      "h2o+obc_vk",
                            "snapkv+obc_k", "random",     "snapkv+obc_v"};
  SweepPair pairs[8];
  size_t n = sweep_pairs_find(names, 7, pairs, 8);
  ck_assert_uint_eq(n, 3); /* tova+obc_v has no baseline tova in the list */
  ck_assert_uint_eq(pairs[0].baseline, 0);
  ck_assert_uint_eq(pairs[0].paired, 3);
  ck_assert_uint_eq(pairs[1].baseline, 2);
  ck_assert_uint_eq(pairs[1].paired, 4);
  ck_assert_uint_eq(pairs[2].baseline, 2);
  ck_assert_uint_eq(pairs[2].paired, 6);
  ck_assert_uint_eq(sweep_pairs_find(names, 7, pairs, 2), 2); /* at most max */
  ck_assert_uint_eq(sweep_pairs_find(names, 1, pairs, 8), 0);
}
END_TEST

START_TEST(pairs_option_adds_each_pair_once) {
  char names[8][32] = {"snapkv"};
  size_t n = 1;
  ck_assert_int_eq(sweep_pairs_expand("tova+obc_vk,h2o+obc_k,tova+obc_vk", names, &n, 8), 0);
  ck_assert_uint_eq(n, 5);
  ck_assert_str_eq(names[0], "snapkv");
  ck_assert_str_eq(names[1], "tova");
  ck_assert_str_eq(names[2], "tova+obc_vk");
  ck_assert_str_eq(names[3], "h2o");
  ck_assert_str_eq(names[4], "h2o+obc_k");
  /* snapkv is the method in both names: --pairs adds only the pairing; the
   * old spelling preset:snapkv+obc_k names the same pair */
  ck_assert_int_eq(sweep_pairs_expand("snapkv+obc_vk,preset:snapkv+obc_vk", names, &n, 8), 0);
  ck_assert_uint_eq(n, 6);
  ck_assert_str_eq(names[5], "snapkv+obc_vk");
  n = 5;
  ck_assert_int_eq(sweep_pairs_expand("obc_vk", names, &n, 8), OBC_EINVAL);
  ck_assert(strstr(obc_error_message(), "--pairs obc_vk: expected X+obc_S"));
  ck_assert_int_eq(sweep_pairs_expand("a+obc_1,b+obc_2,c+obc_3", names, &n, 8), OBC_EINVAL);
  ck_assert(strstr(obc_error_message(), "more than 8 scores"));
}
END_TEST

int main(void) {
  Suite *suite = suite_create("replay_pairs");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, paired_name_gives_its_baseline);
  tcase_add_test(tc, pairs_are_found_when_both_are_swept);
  tcase_add_test(tc, pairs_option_adds_each_pair_once);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? 1 : 0;
}
