/* What the CTest environment (tests/CMakeLists.txt) gives every C test: a
 * scratch folder under $OBC_TMP, one per suite and process so parallel runs
 * never collide, and the real model file when the set-up step fetched it. */
#ifndef OBC_TEST_ENV_H
#define OBC_TEST_ENV_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/obc_file.h"

/* Writes "$OBC_TMP/<name>.<pid>" (or under /tmp) into out; with create, makes
 * the folder and fails the current test when it cannot. */
static inline void test_scratch_path(const char *name, char *out, size_t size, int create) {
  const char *base = getenv("OBC_TMP");
  snprintf(out, size, "%s/%s.%ld", base ? base : "/tmp", name, (long)getpid());
  if (create) ck_assert_int_eq(obc_make_dirs(out), 0);
}

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
