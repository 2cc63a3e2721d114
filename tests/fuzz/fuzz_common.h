/* Shared by the libFuzzer harnesses of tests/fuzz/ (CONTRIBUTING.md,
 * "Fuzzing"): a scratch folder private to the process (under $TMPDIR, removed
 * at exit with whatever is left in it), input bytes written to a file there
 * (the readers under test take paths), and the split of one input into the
 * parts of a folder. Every harness runs single-threaded (one OpenMP thread) so
 * that an input always takes the same path. A child process the product forks
 * to contain a reader (common/obc_child.h) does not report to libFuzzer.
 * Test code, header-only. */
#ifndef OBC_TEST_FUZZ_COMMON_H
#define OBC_TEST_FUZZ_COMMON_H

#include <dirent.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_dir[4096];

void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

/* Runs in every child the product forks (pthread_atfork). The child inherits
 * libFuzzer's crash handling: its death callback (run on a sanitizer's
 * report) and signal handlers would save the input under crashes/ as a
 * finding, though a crash inside the child is the very outcome the child
 * exists to contain, and the parent, which is what the harness tests, goes
 * on with a message. In the child both are reset, so it dies quietly and the
 * parent sees a failed child. What the child runs of obcache's own code is
 * fuzzed in-process by the harnesses of the checksummed formats. */
static inline void fuzz_quiet_child(void) {
  static const int handled[] = {SIGSEGV, SIGBUS,  SIGABRT, SIGILL,  SIGFPE, SIGINT,
                                SIGTERM, SIGXFSZ, SIGUSR1, SIGUSR2, SIGALRM};
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(NULL);
  for (size_t i = 0; i < sizeof handled / sizeof *handled; i++) signal(handled[i], SIG_DFL);
}

/* Removes the scratch folder and every file in it (no subfolders are made). */
static inline void fuzz_remove_dir(void) {
  if (!fuzz_dir[0]) return;
  DIR *dir = opendir(fuzz_dir);
  if (dir) {
    struct dirent *entry;
    char path[4096 + 256];
    while ((entry = readdir(dir)))
      if (strcmp(entry->d_name, ".") && strcmp(entry->d_name, "..")) {
        snprintf(path, sizeof path, "%s/%s", fuzz_dir, entry->d_name);
        unlink(path);
      }
    closedir(dir);
  }
  rmdir(fuzz_dir);
  fuzz_dir[0] = '\0';
}

/* The scratch folder, made on first use; aborts when it cannot be made (the
 * harness would otherwise test nothing). */
static inline const char *fuzz_scratch(void) {
  if (fuzz_dir[0]) return fuzz_dir;
  const char *tmp = getenv("TMPDIR");
  snprintf(fuzz_dir, sizeof fuzz_dir, "%s/obc-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(fuzz_dir)) {
    perror(fuzz_dir);
    abort();
  }
  atexit(fuzz_remove_dir);
  pthread_atfork(NULL, NULL, fuzz_quiet_child);
  omp_set_num_threads(1);
  return fuzz_dir;
}

/* Writes n bytes to folder/name; path (size) receives the full name.
 * Aborts when it cannot: the harness would otherwise test nothing. */
static inline void fuzz_write_at(const char *folder, const char *name, const void *data, size_t n,
                                 char *path, size_t size) {
  snprintf(path, size, "%s/%s", folder, name);
  FILE *fp = fopen(path, "wb");
  if (!fp || (n && fwrite(data, 1, n, fp) != n) || fclose(fp)) {
    perror(path);
    abort();
  }
}

/* Writes n bytes to folder/name. */
static inline void fuzz_write_in(const char *folder, const char *name, const void *data, size_t n) {
  char path[8192];
  fuzz_write_at(folder, name, data, n, path, sizeof path);
}

/* Writes n bytes to <scratch>/name; path receives the full name. */
static inline void fuzz_write(const char *name, const uint8_t *data, size_t n, char *path,
                              size_t size) {
  fuzz_write_at(fuzz_scratch(), name, data, n, path, size);
}

/* Removes folder/name (a file the harness wrote). */
static inline void fuzz_remove_in(const char *folder, const char *name) {
  char path[8192];
  snprintf(path, sizeof path, "%s/%s", folder, name);
  unlink(path);
}

/* Splits data at its first NUL byte: *head is everything before it, *tail
 * everything after (empty when there is no NUL). */
static inline void fuzz_split(const uint8_t *data, size_t n, size_t *head, const uint8_t **tail,
                              size_t *tail_n) {
  const uint8_t *nul = n ? memchr(data, 0, n) : NULL;
  *head = nul ? (size_t)(nul - data) : n;
  *tail = nul ? nul + 1 : data + n;
  *tail_n = nul ? n - *head - 1 : 0;
}

#endif
