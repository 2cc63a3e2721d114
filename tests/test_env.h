/* What the CTest environment (tests/CMakeLists.txt) gives every C test: a
 * scratch folder under $OBC_TMP, one per suite and process so parallel runs
 * never collide and removed when the suite passed, the real model file when
 * the set-up step fetched it, and the stride of the damage loops. */
#ifndef OBC_TEST_ENV_H
#define OBC_TEST_ENV_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/obc_file.h"

/* The time limit of a test case (tcase_set_timeout; tests/CMakeLists.txt
 * gives the same to the cases that set none, as CK_DEFAULT_TIMEOUT), only a
 * safety net against a hang: no test asserts a time. Measured on the 2-core
 * machine with other builds running (ctest -j2, 2026-12-01), the slowest
 * Check suite as a whole took 77 s (test_traces under the sanitizers, before
 * its damage loop took a stride; 53 s for test_model_load@Prescott in
 * Release), so 1200 s is over 15x that. CK_TIMEOUT_MULTIPLIER=N stretches it
 * on a slower machine. */
#define TEST_TIMEOUT_S 1200

/* The folder that holds everything this test process writes:
 * "$OBC_TMP/<suite>.<pid>" (else under /tmp), made by test_scratch_begin() in
 * main before Check forks the tests, so that every test's files lie in it.
 * test_scratch_end() removes it when every test passed and keeps it, printing
 * its path, when one failed. Without test_scratch_begin() it is $OBC_TMP. */
static char test_scratch_root_path[4096];

static inline const char *test_scratch_root(void) {
  if (test_scratch_root_path[0]) return test_scratch_root_path;
  const char *base = getenv("OBC_TMP");
  return base ? base : "/tmp";
}

static inline void test_scratch_begin(const char *suite) {
  const char *base = getenv("OBC_TMP");
  snprintf(test_scratch_root_path, sizeof test_scratch_root_path, "%s/%s.%ld", base ? base : "/tmp",
           suite, (long)getpid());
  if (obc_make_dirs(test_scratch_root_path) != 0) {
    fprintf(stderr, "cannot make the scratch folder %s\n", test_scratch_root_path);
    exit(EXIT_FAILURE);
  }
}

/* The exit status of main: EXIT_SUCCESS and the scratch folder removed when
 * no test failed, else EXIT_FAILURE and its path printed. */
static inline int test_scratch_end(int failed) {
  if (!test_scratch_root_path[0]) return failed ? EXIT_FAILURE : EXIT_SUCCESS;
  if (failed) {
    printf("scratch folder kept: %s\n", test_scratch_root_path);
    return EXIT_FAILURE;
  }
  /* made writable first: tests lock folders to make writes fail */
  char command[8400];
  snprintf(command, sizeof command, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'",
           test_scratch_root_path, test_scratch_root_path);
  if (system(command) != 0) fprintf(stderr, "cannot remove %s\n", test_scratch_root_path);
  return EXIT_SUCCESS;
}

/* Writes "<scratch root>/<name>" into out. */
static inline void test_scratch_file(const char *name, char *out, size_t size) {
  snprintf(out, size, "%s/%s", test_scratch_root(), name);
}

/* Writes "<scratch root>/<name>.<pid>" (one per forked test) into out; with
 * create, makes the folder and fails the current test when it cannot. */
static inline void test_scratch_path(const char *name, char *out, size_t size, int create) {
  snprintf(out, size, "%s/%s.%ld", test_scratch_root(), name, (long)getpid());
  if (create) ck_assert_int_eq(obc_make_dirs(out), 0);
}

/* The step of the loops that damage a fixture once per byte offset: 1 (every
 * byte) in the Release suite; under the sanitizers (OBC_TEST_SANITIZED, which
 * tests/CMakeLists.txt defines when OBC_SANITIZE is set, where each damaged
 * copy costs about 5x more) TEST_DAMAGE_STRIDE_SANITIZED. 3 is odd, so the
 * damaged offsets run through every residue modulo 2, 4 and 8, the sizes of
 * HDF5's fields and the 8 bits the loops flip in turn (bit = offset % 8):
 * every byte position of an address, length or checksum is damaged in some
 * field, every bit position somewhere, and every structure of 3 bytes or more
 * (superblock, object header, message, B-tree node, heap block, chunk) at
 * least once. OBC_DAMAGE_STRIDE=N overrides it, e.g. 1 to run the sanitizer
 * build exhaustively by hand. */
#define TEST_DAMAGE_STRIDE_SANITIZED 3

static inline long test_damage_stride(void) {
  const char *env = getenv("OBC_DAMAGE_STRIDE");
  if (env && atol(env) > 0) return atol(env);
#ifdef OBC_TEST_SANITIZED
  return TEST_DAMAGE_STRIDE_SANITIZED;
#else
  return 1;
#endif
}

/* Whether this process is an @CORE twin (tests/CMakeLists.txt sets
 * OBC_BLAS_TWIN with OpenBLAS forced onto another kernel family), which runs
 * a suite again for its numbers; a slow test that computes nothing through
 * OpenBLAS skips there, printing why, and runs in the suite's own NAME. */
static inline int test_blas_twin(void) { return getenv("OBC_BLAS_TWIN") != NULL; }

/* $OBC_MODEL when readable; otherwise prints a visible SKIP line and returns
 * NULL so the caller can return early. */
static inline const char *test_real_model(void) {
  const char *path = getenv("OBC_MODEL");
  if (!path || access(path, R_OK) != 0) {
    printf("SKIP: OBC_MODEL (%s) missing; run scripts/setup.sh to test on the real SmolLM2 file\n",
           path ? path : "unset");
    return NULL;
  }
  return path;
}

#endif
