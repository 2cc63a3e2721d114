/* Check suite for files in HDF5's unchecksummed formats (traces/trace_format.h,
 * traces/trace_legacy.h, common/obc_child.h): the raw format check, the child
 * process and its limits, and schema-1 traces read through a converted copy:
 * the fixture tests/data/trace_v1.h5 reads as it is stored, damaged copies of
 * it (the byte changes a fuzzer found to crash or exhaust HDF5) fail with a
 * message naming the file, and a schema-1 file relabelled schema 2 is
 * refused. */
#include <check.h>
#include <stdbool.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/obc_child.h"
#include "common/obc_error.h"
#include "tests/test_env.h"
#include "traces/trace.h"
#include "traces/trace_format.h"
#include "traces/trace_h5.h"
#include "traces/trace_legacy.h"

static char scratch[4096];

static void fixture_path(char *out, size_t size) {
  const char *source = getenv("OBC_SOURCE_DIR");
  snprintf(out, size, "%s/tests/data/trace_v1.h5", source ? source : OBC_SOURCE_DIR);
}

/* scratch is made by main, before Check forks each test. */
static void scratch_file(char *out, size_t size, const char *name) {
  snprintf(out, size, "%s/%s", scratch, name);
}

/* Copies the fixture to name in the scratch folder, the first length bytes
 * (all when length < 0), with bytes[i] written at offsets[i]. */
static void damaged_copy(const char *name, long length, const long *offsets,
                         const unsigned char *bytes, size_t n, char *out, size_t size) {
  char from[4200];
  fixture_path(from, sizeof from);
  scratch_file(out, size, name);
  FILE *in = fopen(from, "rb");
  ck_assert_ptr_nonnull(in);
  static unsigned char data[1 << 20];
  size_t total = fread(data, 1, sizeof data, in);
  fclose(in);
  for (size_t i = 0; i < n; i++) data[offsets[i]] = bytes[i];
  if (length >= 0 && (size_t)length < total) total = (size_t)length;
  FILE *fp = fopen(out, "wb");
  ck_assert_ptr_nonnull(fp);
  ck_assert_uint_eq(fwrite(data, 1, total, fp), total);
  ck_assert_int_eq(fclose(fp), 0);
}

/* rc and r are what trace_open(path) gave. */
static void check_refused(const char *path, int rc, const TraceReader *r, const char *phrase) {
  ck_assert_msg(rc == OBC_EFORMAT, "%s: got %d (%s)", path, rc, obc_error_message());
  ck_assert_ptr_null(r);
  ck_assert_msg(strstr(obc_error_message(), path), "'%s' does not name %s", obc_error_message(),
                path);
  ck_assert_msg(!strchr(obc_error_message(), '\n'), "'%s' is not one line", obc_error_message());
  if (phrase)
    ck_assert_msg(strstr(obc_error_message(), phrase), "'%s' lacks '%s'", obc_error_message(),
                  phrase);
}

static void expect_refused(const char *path, const char *phrase) {
  TraceReader *r = NULL;
  int rc = trace_open(path, &r);
  check_refused(path, rc, r, phrase);
}

/* ---- raw format ------------------------------------------------------------ */

START_TEST(lookup3_matches_the_reference_values) {
  /* Bob Jenkins' lookup3.c driver: hashlittle("", 0, 0) and the sentence. */
  ck_assert_uint_eq(trace_format_lookup3("", 0, 0), 0xdeadbeefu);
  const char *text = "Four score and seven years ago";
  ck_assert_uint_eq(trace_format_lookup3(text, strlen(text), 0), 0x17770551u);
  ck_assert_uint_eq(trace_format_lookup3(text, strlen(text), 1), 0xcd628161u);
}
END_TEST

START_TEST(probe_tells_the_checksummed_format_from_the_earliest) {
  char v1[4200], v2[4200];
  fixture_path(v1, sizeof v1);
  scratch_file(v2, sizeof v2, "probe-v2.h5");
  TraceFileFormat f;
  ck_assert_int_eq(trace_format_probe(v1, "a trace", &f), 0);
  ck_assert_int_eq(f.superblock_version, 0);
  ck_assert(!f.checksummed);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
  hid_t file = H5Fcreate(v2, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  ck_assert_int_ge(trace_h5_attr_write_i64(v2, file, "x", 1), 0);
  H5Fclose(file);
  H5Pclose(fapl);
  ck_assert_int_eq(trace_format_probe(v2, "a trace", &f), 0);
  ck_assert_int_eq(f.superblock_version, 3);
  ck_assert(f.checksummed);
  /* a byte of the superblock changed: its checksum fails */
  FILE *fp = fopen(v2, "r+b");
  fseek(fp, 20, SEEK_SET);
  fputc(0x5a, fp);
  fclose(fp);
  ck_assert_int_eq(trace_format_probe(v2, "a trace", &f), OBC_EFORMAT);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "superblock: checksum mismatch"));
  unlink(v2);
}
END_TEST

/* ---- the child process ------------------------------------------------------- */

static int work_replies(void *arg, int fd) {
  (void)arg;
  return obc_child_send(fd, "hello", 5);
}
static int work_fails(void *arg, int fd) {
  (void)arg, (void)fd;
  return obc_fail(OBC_EFORMAT, "file.h5: a message from the child");
}
static int work_crashes(void *arg, int fd) {
  (void)arg, (void)fd;
  raise(SIGSEGV);
  return 0;
}
static int work_hangs(void *arg, int fd) {
  (void)arg, (void)fd;
  for (;;) pause();
  return 0;
}

START_TEST(child_reply_message_crash_and_hang_come_back_apart) {
  ObcChildLimits limits = {.seconds = 60, .memory_bytes = 0};
  ObcChildReply reply;
  ck_assert_int_eq(obc_child_run(work_replies, NULL, &limits, &reply), 0);
  ck_assert(reply.finished && reply.size == 5 && !memcmp(reply.data, "hello", 5));
  obc_child_reply_free(&reply);
  ck_assert_int_eq(obc_child_run(work_fails, NULL, &limits, &reply), OBC_EFORMAT);
  ck_assert(reply.finished);
  ck_assert_str_eq(obc_error_message(), "file.h5: a message from the child");
  obc_child_reply_free(&reply);
  ck_assert_int_eq(obc_child_run(work_crashes, NULL, &limits, &reply), OBC_EEXTERNAL);
  ck_assert(!reply.finished && !reply.timed_out);
  obc_child_reply_free(&reply);
  limits.seconds = 0.5; /* a hang: only the limit ends it */
  ck_assert_int_eq(obc_child_run(work_hangs, NULL, &limits, &reply), OBC_EEXTERNAL);
  ck_assert(!reply.finished && reply.timed_out);
  ck_assert_int_eq(kill(reply.pid, 0), -1); /* killed and reaped */
  obc_child_reply_free(&reply);
}
END_TEST

/* ---- schema 1 ----------------------------------------------------------------- */

/* Dataset name of the fixture read straight with HDF5 as floats (n). */
static void read_raw(const char *path, const char *name, float *out) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  ck_assert_int_ge(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), 0);
  H5Dclose(d);
  H5Fclose(f);
}

START_TEST(schema1_fixture_reads_through_the_child_as_stored) {
  char path[4200];
  fixture_path(path, sizeof path);
  TraceReader *r = NULL;
  ck_assert_msg(trace_open(path, &r) == 0, "%s", obc_error_message());
  const TraceMeta *m = trace_meta(r);
  ck_assert_str_eq(trace_path(r), path);
  ck_assert_int_eq(m->schema_version, 1);
  ck_assert_str_eq(m->content_hash, "");
  ck_assert_str_eq(m->tool_version, "0.1.0");
  ck_assert_str_eq(m->created, "2026-11-30T18:01:33Z");
  ck_assert_uint_eq(m->n_positions, 14);
  ck_assert_uint_eq(m->n_rows, 6);
  ck_assert_uint_eq(m->n_spans, 2);
  ck_assert_str_eq(m->spans[0].name, "needle");
  ck_assert_int_eq(m->spans[0].begin, 5);
  ck_assert_int_eq(m->spans[0].end, 7);
  float K[14 * 4], V[14 * 4], rawK[14 * 4], rawV[14 * 4];
  float Q[6 * 4], O[6 * 4], lse[6], rawQ[2 * 6 * 4], rawO[2 * 6 * 4], rawlse[2 * 6];
  float logits[2 * 16], rawlogits[2 * 16];
  ck_assert_int_eq(trace_read_kv(r, 0, 0, K, V), 0);
  ck_assert_int_eq(trace_read_rows(r, 0, 1, Q, O, lse), 0);
  ck_assert_int_eq(trace_read_logits(r, logits), 0);
  read_raw(path, "/layers/000/K", rawK), read_raw(path, "/layers/000/V", rawV);
  read_raw(path, "/layers/000/Q", rawQ), read_raw(path, "/layers/000/O", rawO);
  read_raw(path, "/layers/000/lse", rawlse), read_raw(path, "/logits", rawlogits);
  ck_assert(!memcmp(K, rawK, sizeof K) && !memcmp(V, rawV, sizeof V));
  ck_assert(!memcmp(Q, rawQ + 24, sizeof Q) && !memcmp(O, rawO + 24, sizeof O));
  ck_assert(!memcmp(lse, rawlse + 6, sizeof lse) && !memcmp(logits, rawlogits, sizeof logits));
  trace_close(r);
}
END_TEST

/* Byte changes to the fixture that crashed HDF5 1.10 (SIGSEGV in its
 * object-header and global-heap code; crashes: true) or made it allocate
 * gigabytes: found by flipping random bytes of the fixture, as a fuzzer
 * does. The latter exceed the child's memory limit, or read intact where
 * there is none (ASan). */
static const struct {
  long offsets[4];
  unsigned char bytes[4];
  bool crashes;
} damage[] = {
    {{2295, 3492, 5341, 7870}, {0x83, 0xa1, 0x45, 0xa8}, true},
    {{1758, 2249, 3381, 7782}, {0x31, 0xe3, 0x1b, 0xe5}, true},
    {{1562, 2318, 4791, 7844}, {0x67, 0xd9, 0xc6, 0xd8}, true},
    {{1766, 2079, 6022, 7779}, {0xcf, 0x41, 0xdd, 0xfc}, true},
    {{1339, 4541, 4842, 27124}, {0x88, 0x37, 0x3a, 0x97}, false},
    {{499, 935, 1302, 4970}, {0x07, 0xc2, 0xec, 0x07}, false},
};

START_TEST(damaged_schema1_copies_fail_with_a_message_naming_the_file) {
  for (size_t i = 0; i < sizeof damage / sizeof *damage; i++) {
    char path[4200], name[64];
    snprintf(name, sizeof name, "damaged-%zu.h5", i);
    damaged_copy(name, -1, damage[i].offsets, damage[i].bytes, 4, path, sizeof path);
    /* Opened once: whether a copy that makes HDF5 allocate gigabytes reads
     * intact or meets the child's time limit depends on the machine's speed
     * (under ASan, where no memory limit applies), so either outcome passes,
     * but a second open could end the other way. */
    TraceReader *r = NULL;
    int rc = trace_open(path, &r);
    if (!damage[i].crashes && rc == 0) {
      ck_assert_uint_eq(trace_meta(r)->n_positions, 14); /* read intact */
      trace_close(r);
    } else {
      check_refused(path, rc, r, damage[i].crashes ? "damaged schema-1 file" : NULL);
    }
    unlink(path);
  }
  /* cut short anywhere: refused, naming the file */
  for (long length = 100; length < 32184; length += 1597) {
    char path[4200];
    damaged_copy("truncated.h5", length, NULL, NULL, 0, path, sizeof path);
    expect_refused(path, NULL);
    unlink(path);
  }
}
END_TEST

START_TEST(schema1_file_relabelled_schema2_is_refused_by_the_format_check) {
  char path[4200];
  damaged_copy("says-2.h5", -1, NULL, NULL, 0, path, sizeof path);
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  ck_assert_int_ge(f, 0);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "schema_version", 2), 0);
  ck_assert_int_ge(H5Fclose(f), 0);
  expect_refused(path, "not in the checksummed HDF5 1.10 format");
  unlink(path);
}
END_TEST

START_TEST(writer_output_is_checksummed_and_a_forged_header_is_refused) {
  char v1[4200], v2[4200];
  fixture_path(v1, sizeof v1);
  scratch_file(v2, sizeof v2, "written-v2.h5");
  /* trace_legacy_convert reads through a child here, and writes with the writer */
  ck_assert_msg(trace_legacy_convert(v1, v2, 0, NULL) == 0, "%s", obc_error_message());
  TraceFileFormat f;
  ck_assert_int_eq(trace_format_probe(v2, "a trace", &f), 0);
  ck_assert_int_eq(f.superblock_version, 3);
  ck_assert(f.checksummed);
  TraceReader *r = NULL;
  ck_assert_msg(trace_open(v2, &r) == 0, "%s", obc_error_message()); /* every header checked */
  ck_assert_int_eq(trace_meta(r)->schema_version, 2);
  trace_close(r);
  /* the magic of the last object header ("OHDR") of the file changed: that
   * object is not a version-2 header any more, which the reader finds from
   * the raw bytes before HDF5 parses it */
  FILE *fp = fopen(v2, "r+b");
  ck_assert_ptr_nonnull(fp);
  static unsigned char data[1 << 20];
  size_t n = fread(data, 1, sizeof data, fp);
  long last = -1;
  for (size_t i = 0; i + 4 <= n; i++)
    if (!memcmp(data + i, "OHDR", 4)) last = (long)i;
  ck_assert_int_gt(last, 0);
  fseek(fp, last + 3, SEEK_SET);
  fputc('X', fp);
  fclose(fp);
  expect_refused(v2, "not a version-2 object header");
  unlink(v2);
}
END_TEST

static Suite *legacy_suite(void) {
  Suite *s = suite_create("legacy");
  TCase *tc = tcase_create("legacy");
  /* The damaged copies took 8 s under ASan on 2 busy cores (a hang would
   * take the child's 10 s limit per copy): a safety net only. */
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, lookup3_matches_the_reference_values);
  tcase_add_test(tc, probe_tells_the_checksummed_format_from_the_earliest);
  tcase_add_test(tc, child_reply_message_crash_and_hang_come_back_apart);
  tcase_add_test(tc, schema1_fixture_reads_through_the_child_as_stored);
  tcase_add_test(tc, damaged_schema1_copies_fail_with_a_message_naming_the_file);
  tcase_add_test(tc, schema1_file_relabelled_schema2_is_refused_by_the_format_check);
  tcase_add_test(tc, writer_output_is_checksummed_and_a_forged_header_is_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  trace_h5_silence();
  test_scratch_path("legacy", scratch, sizeof scratch, 0);
  if (obc_make_dirs(scratch)) {
    fprintf(stderr, "%s\n", obc_error_message());
    return 1;
  }
  SRunner *runner = srunner_create(legacy_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  if (!failed) rmdir(scratch); /* each test removed its files */
  return failed ? 1 : 0;
}
