/* Check suite for common/: pending files appear only when complete, and the
 * number/list parsers reject bad input with a message naming the option. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_cli.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "tests/test_env.h"

static char scratch[4096];

static void make_scratch(void) { test_scratch_path("common", scratch, sizeof scratch, 1); }

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

START_TEST(pending_text_file_appears_only_on_success) {
  make_scratch();
  char path[4200];
  snprintf(path, sizeof path, "%s/out.txt", scratch);
  ObcPendingFile file;
  FILE *fp;
  ck_assert_int_eq(obc_text_open(&file, path, &fp), 0);
  fprintf(fp, "hello\n");
  ck_assert(!exists(path));
  ck_assert(exists(file.temp_path));
  ck_assert_int_eq(obc_text_close(&file, fp, 1), 0);
  ck_assert(exists(path));
  ck_assert(!exists(file.temp_path));

  char path2[4200];
  snprintf(path2, sizeof path2, "%s/failed.txt", scratch);
  ck_assert_int_eq(obc_text_open(&file, path2, &fp), 0);
  fprintf(fp, "half");
  ck_assert_int_eq(obc_text_close(&file, fp, 0), 0);
  ck_assert(!exists(path2));
  ck_assert(!exists(file.temp_path));
}
END_TEST

START_TEST(pending_file_in_missing_folder_fails_with_path) {
  ObcPendingFile file;
  int rc = obc_pending_init(&file, "/nonexistent-folder-obc/x.h5");
  ck_assert_int_eq(rc, OBC_EIO);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "/nonexistent-folder-obc/x.h5"));
}
END_TEST

START_TEST(parsers_reject_garbage_and_name_the_option) {
  size_t v;
  ck_assert_int_eq(obc_parse_size("--window", "12", &v), 0);
  ck_assert_uint_eq(v, 12);
  ck_assert_int_eq(obc_parse_size("--window", "-3", &v), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "--window"));
  ck_assert_int_eq(obc_parse_size("--topk", "4x", &v), OBC_EINVAL);
  size_t list[8], n = 0;
  ck_assert_int_eq(obc_parse_size_list("--topk", "10,20,40", list, &n, 8), 0);
  ck_assert_uint_eq(n, 3);
  ck_assert_uint_eq(list[2], 40);
  double d;
  ck_assert_int_eq(obc_parse_double("--depth", "nan", &d), OBC_EINVAL);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("common");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, pending_text_file_appears_only_on_success);
  tcase_add_test(tc, pending_file_in_missing_folder_fails_with_path);
  tcase_add_test(tc, parsers_reject_garbage_and_name_the_option);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
