/* Check suite for common/: pending files and output sets appear only when
 * complete, the number/list parsers reject bad input with a message naming
 * the option, and the option tables parse argv and print the help. */
#include <cblas.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_json.h"
#include "common/obc_options.h"
#include "common/obc_parse.h"
#include "common/obc_startup.h"
#include "common/obc_text.h"
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

/* Begins a set in dir and writes a.txt and b.txt into it, both pending. */
static void output_two(ObcOutputSet *set, const char *dir) {
  FILE *fp;
  ck_assert_int_eq(obc_output_begin(set, dir), 0);
  ck_assert_int_eq(obc_output_open(set, "a.txt", &fp), 0);
  fprintf(fp, "a\n");
  ck_assert_int_eq(obc_output_close(set, fp), 0);
  ck_assert_int_eq(obc_output_open(set, "b.txt", &fp), 0);
  fprintf(fp, "b\n");
  ck_assert_int_eq(obc_output_close(set, fp), 0);
  ck_assert_str_eq(obc_output_name(set, 1), "b.txt");
}

START_TEST(output_set_appears_whole_or_not_at_all) {
  make_scratch();
  char dir[4200], a[4300], b[4300];
  static ObcOutputSet set; /* 100 KB */

  /* Committed: both files, no temporary ones. */
  snprintf(dir, sizeof dir, "%s/set-ok/sub", scratch);
  output_two(&set, dir);
  snprintf(a, sizeof a, "%s/a.txt", dir);
  snprintf(b, sizeof b, "%s/b.txt", dir);
  ck_assert(!exists(a) && !exists(b));
  ck_assert_int_eq(obc_output_end(&set, 0), 0);
  ck_assert(exists(a) && exists(b));
  ck_assert(!exists(set.files[0].temp_path) && !exists(set.files[1].temp_path));

  /* A failed writer: nothing, and not the folder the set made. */
  snprintf(dir, sizeof dir, "%s/set-failed", scratch);
  output_two(&set, dir);
  ck_assert_int_eq(obc_output_end(&set, OBC_EIO), OBC_EIO);
  ck_assert(!exists(dir));

  /* A folder that was there stays. */
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  output_two(&set, dir);
  obc_output_abort(&set);
  ck_assert(exists(dir));
  snprintf(a, sizeof a, "%s/a.txt", dir);
  ck_assert(!exists(a));

  /* A rename that fails (b.txt became a non-empty folder): a.txt, already
   * renamed, is removed again, and no temporary file stays. */
  snprintf(dir, sizeof dir, "%s/set-rename", scratch);
  output_two(&set, dir);
  snprintf(b, sizeof b, "%s/b.txt", dir);
  ck_assert_int_eq(mkdir(b, 0755), 0);
  char inside[4400];
  snprintf(inside, sizeof inside, "%s/keep", b);
  FILE *fp = fopen(inside, "w");
  ck_assert_ptr_nonnull(fp);
  fclose(fp);
  ck_assert_int_ne(obc_output_end(&set, 0), 0);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "b.txt"));
  snprintf(a, sizeof a, "%s/a.txt", dir);
  ck_assert(!exists(a));
  ck_assert(!exists(set.files[0].temp_path) && !exists(set.files[1].temp_path));
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
  /* Empty items are refused, not skipped: "1,,2" is not "1,2". */
  const char *empty[] = {"1,,2", ",1", "1,", ",", ""};
  for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
    n = 0;
    ck_assert_int_eq(obc_parse_size_list("--window", empty[i], list, &n, 8), OBC_EINVAL);
    ck_assert_ptr_nonnull(strstr(obc_error_message(), "--window: empty"));
  }
  char buf[16], *items[4];
  ck_assert_int_eq(obc_split_list("--only", "a,bc", buf, sizeof buf, items, 4, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_str_eq(items[1], "bc");
  ck_assert_int_eq(obc_split_list("--only", "a,b,c", buf, sizeof buf, items, 2, &n), OBC_EINVAL);
  double d;
  ck_assert_int_eq(obc_parse_double("--depth", "nan", &d), OBC_EINVAL);
}
END_TEST

/* A small table covering every kind the commands use. */
typedef struct {
  const char *out;
  size_t rows, threads;
  double depth;
  bool quiet, rows_seen;
  int level;
} Parsed;

static int parse_level(void *target, const char *option, const char *value) {
  long v = 0;
  int rc = obc_parse_int(option, value, &v);
  if (!rc && (v < 0 || v > 9)) rc = obc_fail(OBC_EINVAL, "%s: %ld is outside 0..9", option, v);
  if (!rc) *(int *)target = (int)v;
  return rc;
}

static int parse_example(int argc, char **argv, Parsed *p, ObcArguments *args) {
  memset(p, 0, sizeof *p);
  const ObcOption options[] = {
      OBC_OPT_TEXT("--output", "PATH", &p->out, "file to write", .alias = "-o"),
      OBC_OPT_SIZE("--rows", "R", &p->rows, "rows kept", .seen = &p->rows_seen),
      OBC_OPTION_HEADING("tuning:"),
      OBC_OPT_DOUBLE("--depth", "D", &p->depth, "needle depth in percent"),
      OBC_OPT_CUSTOM("--compress", "0-9", &p->level, parse_level, "deflate level"),
      OBC_OPT_FLAG("--quiet", &p->quiet, "no progress line"),
  };
  ObcOptionList list = OBC_OPTION_LIST(options);
  return obc_options_parse("example", &list, 1, argc, argv, args);
}

START_TEST(write_errors_tell_a_full_disk_from_a_file_size_limit) {
  ck_assert_str_eq(obc_write_error_text(NULL, ENOSPC), "disk full");
  ck_assert_str_eq(obc_write_error_text(NULL, EFBIG), "file size limit exceeded (ulimit -f)");
  ck_assert_str_eq(obc_write_error_text(NULL, EACCES), strerror(EACCES));
  ck_assert_str_eq(obc_write_error_text(NULL, 0), "I/O error");
  /* errno lost (a stdio stream that failed earlier): a file that reached the
   * size limit is the limit's doing. The limit is this forked test's own. */
  char dir[4096], path[4200];
  test_scratch_path("write_error", dir, sizeof dir, 1);
  snprintf(path, sizeof path, "%s/cut.txt", dir);
  FILE *fp = fopen(path, "w");
  ck_assert_ptr_nonnull(fp);
  for (int i = 0; i < 4096; i++) fputc('x', fp);
  fclose(fp);
  ck_assert_str_eq(obc_write_error_text(path, 0), "I/O error");
  struct rlimit limit;
  ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &limit), 0);
  limit.rlim_cur = 4096;
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &limit), 0);
  ck_assert_str_eq(obc_write_error_text(path, 0), "file size limit exceeded (ulimit -f)");
  ck_assert_str_eq(obc_write_error_text(path, EIO), "file size limit exceeded (ulimit -f)");
  unlink(path);
}
END_TEST

START_TEST(options_take_separate_and_equals_values) {
  char *argv[] = {"example", "--rows", "12", "--depth=25.5", "-o", "a.h5", "--compress=3"};
  Parsed p;
  ObcArguments args;
  ck_assert_int_eq(parse_example(7, argv, &p, &args), OBC_OK);
  ck_assert_uint_eq(p.rows, 12);
  ck_assert(p.rows_seen);
  ck_assert_double_eq(p.depth, 25.5);
  ck_assert_str_eq(p.out, "a.h5");
  ck_assert_int_eq(p.level, 3);
  ck_assert(!p.quiet);
  char *argv2[] = {"example", "--output=b.h5", "-o=c.h5"};
  ck_assert_int_eq(parse_example(3, argv2, &p, &args), OBC_OK);
  ck_assert_str_eq(p.out, "c.h5");
  ck_assert(!p.rows_seen);
}
END_TEST

START_TEST(options_flags_and_positionals_keep_their_order) {
  char *argv[] = {"example", "first.h5", "--quiet", "-", "--", "--rows"};
  Parsed p;
  ObcArguments args;
  ck_assert_int_eq(parse_example(6, argv, &p, &args), OBC_OK);
  ck_assert(p.quiet);
  ck_assert_uint_eq(args.n_positional, 3);
  ck_assert_str_eq(args.positional[0], "first.h5");
  ck_assert_str_eq(args.positional[1], "-");
  ck_assert_str_eq(args.positional[2], "--rows");
  ck_assert(!args.help);
}
END_TEST

START_TEST(options_errors_name_the_option) {
  Parsed p;
  ObcArguments args;
  char *missing[] = {"example", "--rows"};
  ck_assert_int_eq(parse_example(2, missing, &p, &args), OBC_EINVAL);
  ck_assert_str_eq(obc_error_message(), "--rows: missing value");
  char *empty[] = {"example", "--output="};
  ck_assert_int_eq(parse_example(2, empty, &p, &args), OBC_EINVAL);
  ck_assert_str_eq(obc_error_message(), "--output: missing value");
  char *unknown[] = {"example", "--bogus=1"};
  ck_assert_int_eq(parse_example(2, unknown, &p, &args), OBC_EINVAL);
  ck_assert_str_eq(obc_error_message(), "unknown option '--bogus=1' (try obcache example --help)");
  char *flag_value[] = {"example", "--quiet=yes"};
  ck_assert_int_eq(parse_example(2, flag_value, &p, &args), OBC_EINVAL);
  ck_assert_str_eq(obc_error_message(), "--quiet: takes no value");
  char *bad_number[] = {"example", "--rows", "-3"};
  ck_assert_int_eq(parse_example(3, bad_number, &p, &args), OBC_EINVAL);
  ck_assert_str_eq(obc_error_message(), "--rows: expected a non-negative integer, got '-3'");
  char *out_of_range[] = {"example", "--compress", "12"};
  ck_assert_int_eq(parse_example(3, out_of_range, &p, &args), OBC_EINVAL);
  ck_assert_str_eq(obc_error_message(), "--compress: 12 is outside 0..9");
  char *prefix[] = {"example", "--row", "3"};
  ck_assert_int_eq(parse_example(3, prefix, &p, &args), OBC_EINVAL);
}
END_TEST

START_TEST(options_help_anywhere_wins) {
  char *argv[] = {"example", "--rows", "x", "-h"};
  Parsed p;
  ObcArguments args;
  ck_assert_int_eq(parse_example(4, argv, &p, &args), OBC_OK);
  ck_assert(args.help);
}
END_TEST

START_TEST(decimal_numbers_only_no_hex_inf_or_spaces) {
  static const char *const good[] = {"0", "16", "-3", "0.25", ".5", "5.", "1e-3", "2E+4", "-0.5e2"};
  static const char *const bad[] = {"",   "0x10", "0X1p4", "inf", "nan",   " 1",  "1 ",
                                    "+1", "1e",   "e5",    ".",   "1.2.3", "--1", "1%"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++)
    ck_assert_msg(obc_parse_is_decimal(good[i]), "%s", good[i]);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    ck_assert_msg(!obc_parse_is_decimal(bad[i]), "%s", bad[i]);
  double x = 0;
  long n = 0;
  ck_assert_int_eq(obc_parse_double("--x", "0x10", &x), OBC_EINVAL);
  ck_assert_int_eq(obc_parse_int("--n", "1e3", &n), OBC_EINVAL);
  ck_assert_int_eq(obc_parse_int("--n", "-12", &n), OBC_OK);
  ck_assert_int_eq(n, -12);
}
END_TEST

START_TEST(json_duplicate_keys_are_found_at_any_depth) {
  static const struct {
    const char *text, *repeated; /* NULL: none */
  } cases[] = {
      {"{\"a\": 1, \"b\": 2}", NULL},
      {"{\"a\": 1, \"a\": 2}", "a"},
      {"{\"x\": {\"k\": 1, \"k\": 1}}", "k"},
      {"[{\"a\": 1}, {\"a\": 1, \"z\": [{\"q\": 0, \"q\": 1}]}]", "q"},
      {"{\"a\": {\"a\": 1}, \"b\": [\"a\", \"a\"]}", NULL}, /* nesting and values repeat */
      {"{\"k0\":0,\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,"
       "\"k9\":9,\"k3\":10}",
       "k3"}, /* past the pairwise size: sorted */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    cJSON *root = cJSON_Parse(cases[i].text);
    ck_assert_ptr_nonnull(root);
    const char *found = obc_json_duplicate_key(root);
    if (cases[i].repeated)
      ck_assert_msg(found && !strcmp(found, cases[i].repeated), "%s: %s", cases[i].text,
                    found ? found : "none");
    else
      ck_assert_msg(!found, "%s: %s", cases[i].text, found);
    cJSON_Delete(root);
  }
}
END_TEST

START_TEST(text_escape_shows_control_bytes_and_cuts_what_does_not_fit) {
  char out[OBC_ESCAPED_SIZE(32)];
  ck_assert_str_eq(obc_text_escape(out, sizeof out, "plain text", false), "plain text");
  ck_assert_str_eq(obc_text_escape(out, sizeof out, "\x1b[31mred\n\r\t\x7f\x01", false),
                   "\\x1b[31mred\\n\\r\\t\\x7f\\x01");
  ck_assert_str_eq(obc_text_escape(out, sizeof out, "say \"hi\"", true), "say \\\"hi\\\"");
  ck_assert_str_eq(obc_text_escape(out, sizeof out, "say \"hi\"", false), "say \"hi\"");
  /* Every byte a control byte: OBC_ESCAPED_SIZE is room enough. */
  char all[9] = "\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b", wide[OBC_ESCAPED_SIZE(8)];
  ck_assert_str_eq(obc_text_escape(wide, sizeof wide, all, false),
                   "\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b");
  char small[10];
  ck_assert_str_eq(obc_text_escape(small, sizeof small, "0123456789abc", false), "012345...");
  ck_assert_str_eq(obc_text_escape(small, sizeof small, "\n\n\n\n\n", false), "\\n\\n\\n...");
}
END_TEST

/* The recorded command line is "obcache" and the arguments as given, one
 * space apart: an argument holding a space or a quote is not quoted (plans
 * and reports store this text, so it must not change). */
START_TEST(command_line_joins_the_arguments_as_given) {
  char out[64];
  char *argv[] = {"analyze", "a b.h5", "--window=\"16\"", "-o", "out dir"};
  obc_text_command_line(5, argv, out, sizeof out);
  ck_assert_str_eq(out, "obcache analyze a b.h5 --window=\"16\" -o out dir");
  obc_text_command_line(0, argv, out, sizeof out);
  ck_assert_str_eq(out, "obcache");
  char small[16]; /* cut: 15 bytes and the NUL */
  obc_text_command_line(5, argv, small, sizeof small);
  ck_assert_str_eq(small, "obcache analyze");
  char tiny[12];
  obc_text_command_line(5, argv, tiny, sizeof tiny);
  ck_assert_str_eq(tiny, "obcache ana");
}
END_TEST

/* Wrapped text: words kept whole, lines at most width columns, every line
 * it starts indented; the first line continues where the cursor stands. */
START_TEST(wrapped_text_breaks_between_words_and_indents_new_lines) {
  char *buf = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&buf, &size);
  ck_assert_ptr_nonnull(out);
  fputs("  --x   ", out);
  obc_text_print_wrapped(out, "one two  three fourfourfour five", 8, 8, 20);
  fputs("    ", out);
  obc_text_print_wrapped(out, "a-word-longer-than-the-line b", 4, 4, 10);
  fclose(out);
  ck_assert_str_eq(buf,
                   "  --x   one two\n"
                   "        three\n"
                   "        fourfourfour\n"
                   "        five\n"
                   "    a-word-longer-than-the-line\n"
                   "    b\n");
  free(buf);
}
END_TEST

START_TEST(options_help_lists_every_option_with_its_default) {
  Parsed p;
  memset(&p, 0, sizeof p);
  p.rows = 128;
  p.depth = 0.5;
  const ObcOption options[] = {
      OBC_OPT_TEXT("--output", "PATH", &p.out, "file to write", .alias = "-o"),
      OBC_OPT_SIZE("--rows", "R", &p.rows, "rows kept"),
      OBC_OPT_DOUBLE("--depth", "D", &p.depth, "needle depth"),
      OBC_OPT_SIZE("--threads", "N", &p.threads, "OpenMP threads", .default_text = "all cores"),
      OBC_OPTION_HEADING("tuning:"),
      OBC_OPT_TEXT("--a-rather-long-option-name", "VALUE", &p.out,
                   "a description long enough to need a second line once it is wrapped at "
                   "eighty columns by the printer",
                   .default_text = "7"),
      OBC_OPT_TEXT("--hidden", "H", &p.out, NULL),
      OBC_OPT_FLAG("--quiet", &p.quiet, "no progress line"),
  };
  ObcOptionList list = OBC_OPTION_LIST(options);
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  obc_options_print_help(out, &list, 1);
  fclose(out);
  ck_assert_ptr_nonnull(strstr(text, "  -o, --output PATH    file to write\n"));
  /* A default is the target's value when the help is printed; a 0 or a NULL
   * shows none; default_text, when given, wins. */
  ck_assert_ptr_nonnull(strstr(text, "  --rows R             rows kept (default 128)\n"));
  ck_assert_ptr_nonnull(strstr(text, "  --depth D            needle depth (default 0.5)\n"));
  ck_assert_ptr_nonnull(
      strstr(text, "  --threads N          OpenMP threads (default all cores)\n"));
  ck_assert_ptr_nonnull(strstr(text, "\ntuning:\n"));
  ck_assert_ptr_nonnull(strstr(text, "  --a-rather-long-option-name VALUE\n"));
  ck_assert_ptr_nonnull(strstr(text, "printer (default 7)\n"));
  ck_assert_ptr_nonnull(strstr(text, "  --quiet              no progress line\n"));
  ck_assert_ptr_null(strstr(text, "--hidden"));
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
    ck_assert_uint_le(strlen(line), 80);
  free(text);
}
END_TEST

START_TEST(options_usage_shows_custom_defaults_and_ends_with_help) {
  double depth = 50;
  int level = 0;
  size_t lengths[4] = {1024, 2048}, n_lengths = 2;
  ObcSizeList list_target = {lengths, &n_lengths, 4};
  const char *plain = NULL;
  const ObcOption options[] = {
      OBC_OPT_CUSTOM("--depth", "D", &depth, NULL, "needle depth", .show = obc_option_show_double),
      OBC_OPT_CUSTOM("--compress", "0-9", &level, NULL, "deflate level",
                     .show = obc_option_show_int),
      OBC_OPT_CUSTOM("--lengths", "N,..", &list_target, obc_option_parse_size_list, "lengths",
                     .show = obc_option_show_size_list),
      OBC_OPT_CUSTOM("--custom", "X", &plain, NULL, "no show, no default"),
  };
  ObcOptionList list = OBC_OPTION_LIST(options);
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  obc_options_print_usage(out, "usage: obcache x [options]\n\nDoes x.\n", &list, 1);
  fclose(out);
  /* A custom option's default is what its show makes of the target: an int
   * 0 is a value, a list is its entries; without show there is none. */
  ck_assert_str_eq(text,
                   "usage: obcache x [options]\n"
                   "\n"
                   "Does x.\n"
                   "\n"
                   "options:\n"
                   "  --depth D            needle depth (default 50)\n"
                   "  --compress 0-9       deflate level (default 0)\n"
                   "  --lengths N,..       lengths (default 1024,2048)\n"
                   "  --custom X           no show, no default\n"
                   "  -h, --help           this help\n");
  free(text);
}
END_TEST

/* ---- the BLAS kernel family (common/obc_startup.h) ---- */

/* A processor with everything up to `tier` (0 SSE3, 1 AVX, 2 AVX2 + FMA,
 * 3 AVX-512 F/BW/DQ/VL), and an OS that saves every register it has. */
static ObcCpuFeatures cpu_up_to(int tier) {
  ObcCpuFeatures f = {.sse3 = 1};
  if (tier >= 1) f.avx = f.os_ymm = 1;
  if (tier >= 2) f.avx2 = f.fma = 1;
  if (tier >= 3) f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = f.os_zmm = 1;
  return f;
}

START_TEST(blas_core_for_cpu_takes_the_widest_family_the_os_saves) {
  ObcCpuFeatures none = {0};
  ck_assert_ptr_null(obc_blas_core_for_cpu(&none));
  ObcCpuFeatures f = cpu_up_to(0);
  ck_assert_ptr_null(obc_blas_core_for_cpu(&f));
  f = cpu_up_to(1);
  ck_assert_str_eq(obc_blas_core_for_cpu(&f), "Sandybridge");
  f = cpu_up_to(2);
  ck_assert_str_eq(obc_blas_core_for_cpu(&f), "Haswell");
  f = cpu_up_to(3);
  ck_assert_str_eq(obc_blas_core_for_cpu(&f), "SkylakeX");
  /* Registers the OS does not save cannot be used. */
  f = cpu_up_to(3);
  f.os_zmm = 0;
  ck_assert_str_eq(obc_blas_core_for_cpu(&f), "Haswell");
  f = cpu_up_to(3);
  f.os_ymm = f.os_zmm = 0;
  ck_assert_ptr_null(obc_blas_core_for_cpu(&f));
  /* AVX-512 F alone (Knights Landing has no BW/VL) is not SkylakeX's set. */
  f = cpu_up_to(3);
  f.avx512bw = f.avx512vl = 0;
  ck_assert_str_eq(obc_blas_core_for_cpu(&f), "Haswell");
  /* AVX2 without FMA is not Haswell's set. */
  f = cpu_up_to(2);
  f.fma = 0;
  ck_assert_str_eq(obc_blas_core_for_cpu(&f), "Sandybridge");
}
END_TEST

START_TEST(blas_core_tier_knows_every_name_case_insensitively) {
  ck_assert_int_eq(obc_blas_core_tier("Prescott"), OBC_BLAS_TIER_SSE);
  ck_assert_int_eq(obc_blas_core_tier("PRESCOTT"), OBC_BLAS_TIER_SSE);
  ck_assert_int_eq(obc_blas_core_tier("Nehalem"), OBC_BLAS_TIER_SSE);
  ck_assert_int_eq(obc_blas_core_tier("Barcelona"), OBC_BLAS_TIER_SSE);
  ck_assert_int_eq(obc_blas_core_tier("sandybridge"), OBC_BLAS_TIER_AVX);
  ck_assert_int_eq(obc_blas_core_tier("Haswell"), OBC_BLAS_TIER_AVX2);
  ck_assert_int_eq(obc_blas_core_tier("Zen"), OBC_BLAS_TIER_AVX2);
  ck_assert_int_eq(obc_blas_core_tier("SkylakeX"), OBC_BLAS_TIER_AVX512);
  ck_assert_int_eq(obc_blas_core_tier("Cooperlake"), OBC_BLAS_TIER_AVX512);
  ck_assert_int_eq(obc_blas_core_tier("Unknown"), OBC_BLAS_TIER_UNKNOWN);
  ck_assert_int_eq(obc_blas_core_tier(""), OBC_BLAS_TIER_UNKNOWN);
  ck_assert_int_eq(obc_blas_core_tier(NULL), OBC_BLAS_TIER_UNKNOWN);
}
END_TEST

START_TEST(blas_core_choice_replaces_only_generic_cores) {
  ObcCpuFeatures xeon = cpu_up_to(3), epyc = cpu_up_to(2), old = cpu_up_to(1), sse = cpu_up_to(0);
  /* The case of an AVX-512 Xeon newer than the installed OpenBLAS. */
  ck_assert_str_eq(obc_blas_core_choice("Prescott", &xeon), "SkylakeX");
  ck_assert_str_eq(obc_blas_core_choice("Core2", &epyc), "Haswell");
  ck_assert_str_eq(obc_blas_core_choice("Nehalem", &old), "Sandybridge");
  /* Generic kernels are right where nothing better runs. */
  ck_assert_ptr_null(obc_blas_core_choice("Prescott", &sse));
  /* OpenBLAS's own non-generic choice is kept, even below the CPU's tier. */
  ck_assert_ptr_null(obc_blas_core_choice("Haswell", &xeon));
  ck_assert_ptr_null(obc_blas_core_choice("Zen", &xeon));
  ck_assert_ptr_null(obc_blas_core_choice("Cooperlake", &xeon));
  ck_assert_ptr_null(obc_blas_core_choice("Sandybridge", &epyc));
  /* A name this table does not know is no evidence of a fallback. */
  ck_assert_ptr_null(obc_blas_core_choice("Diamondrapids", &xeon));
}
END_TEST

START_TEST(cpu_features_find_every_flag_the_kernel_lists) {
  /* Linux lists a flag in /proc/cpuinfo only when the CPU has it and the
   * kernel saves its registers (it clears AVX and all that depends on it
   * without the YMM state, AVX-512 without the ZMM state), so every flag
   * it lists, CPUID must find with the OS state it needs. */
  FILE *fp = fopen("/proc/cpuinfo", "r");
  if (!fp) return;
  char line[8192];
  int found = 0;
  while (fgets(line, sizeof line, fp))
    if (!strncmp(line, "flags", 5)) {
      found = 1;
      break;
    }
  fclose(fp);
  if (!found) return; /* not x86 */
  ObcCpuFeatures f;
  obc_cpu_features(&f);
  struct {
    const char *flag;
    int have;
  } flags[] = {{" pni", f.sse3},
               {" avx", f.avx && f.os_ymm},
               {" avx2", f.avx2 && f.os_ymm},
               {" fma", f.fma && f.os_ymm},
               {" avx512f", f.avx512f && f.os_zmm},
               {" avx512bw", f.avx512bw && f.os_zmm},
               {" avx512dq", f.avx512dq && f.os_zmm},
               {" avx512vl", f.avx512vl && f.os_zmm}};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    char word[32];
    snprintf(word, sizeof word, "%s ", flags[i].flag);
    int listed = strstr(line, word) != NULL;
    if (!listed) { /* the last flag of the line ends in a newline */
      size_t n = strlen(flags[i].flag), len = strlen(line);
      listed = len > n && !strncmp(line + len - n - 1, flags[i].flag, n) && line[len - 1] == '\n';
    }
    /* One way only: a kernel may hide a flag CPUID still reports
     * (clearcpuid=, mitigations that turn AVX off). */
    ck_assert_msg(!listed || flags[i].have, "%s: listed in /proc/cpuinfo, not found by CPUID",
                  flags[i].flag);
  }
}
END_TEST

START_TEST(suite_runs_the_kernels_users_get) {
  /* main() ran obc_startup_defaults like obcache's: unless the environment
   * forced a core (the @Prescott twins do), no generic kernels on a CPU
   * with better ones. */
  const char *forced = getenv("OPENBLAS_CORETYPE");
  const char *chosen = getenv(OBC_BLAS_CHOSEN_ENV);
  if (forced && forced[0] && !(chosen && chosen[0])) return;
  ObcCpuFeatures f;
  obc_cpu_features(&f);
  if (!obc_blas_core_for_cpu(&f)) return;
  ck_assert_msg(obc_blas_core_tier(openblas_get_corename()) != OBC_BLAS_TIER_SSE,
                "the suite runs OpenBLAS's generic %s kernels on a CPU with %s",
                openblas_get_corename(), obc_blas_core_for_cpu(&f));
}
END_TEST

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  Suite *suite = suite_create("common");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, pending_text_file_appears_only_on_success);
  tcase_add_test(tc, pending_file_in_missing_folder_fails_with_path);
  tcase_add_test(tc, output_set_appears_whole_or_not_at_all);
  tcase_add_test(tc, parsers_reject_garbage_and_name_the_option);
  tcase_add_test(tc, options_take_separate_and_equals_values);
  tcase_add_test(tc, write_errors_tell_a_full_disk_from_a_file_size_limit);
  tcase_add_test(tc, options_flags_and_positionals_keep_their_order);
  tcase_add_test(tc, options_errors_name_the_option);
  tcase_add_test(tc, options_help_anywhere_wins);
  tcase_add_test(tc, options_help_lists_every_option_with_its_default);
  tcase_add_test(tc, options_usage_shows_custom_defaults_and_ends_with_help);
  tcase_add_test(tc, blas_core_for_cpu_takes_the_widest_family_the_os_saves);
  tcase_add_test(tc, blas_core_tier_knows_every_name_case_insensitively);
  tcase_add_test(tc, blas_core_choice_replaces_only_generic_cores);
  tcase_add_test(tc, cpu_features_find_every_flag_the_kernel_lists);
  tcase_add_test(tc, suite_runs_the_kernels_users_get);
  tcase_add_test(tc, text_escape_shows_control_bytes_and_cuts_what_does_not_fit);
  tcase_add_test(tc, decimal_numbers_only_no_hex_inf_or_spaces);
  tcase_add_test(tc, json_duplicate_keys_are_found_at_any_depth);
  tcase_add_test(tc, command_line_joins_the_arguments_as_given);
  tcase_add_test(tc, wrapped_text_breaks_between_words_and_indents_new_lines);
  suite_add_tcase(suite, tc);
  test_scratch_begin("common");
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
