/* obc_data_dir (common/obc_paths.h): the binary's path from /proc/self/exe,
 * two folders up, then share/obcache. */
#include "common/obc_paths.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef OBC_SOURCE_DIR
#define OBC_SOURCE_DIR "."
#endif

static char data_dir[PATH_MAX + sizeof OBC_DATA_SUBDIR + 1];
static pthread_once_t data_dir_once = PTHREAD_ONCE_INIT;

static void find_data_dir(void) {
  snprintf(data_dir, sizeof data_dir, "%s", OBC_SOURCE_DIR);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/'); /* PREFIX/bin/obcache -> PREFIX/bin */
  if (!slash) return;
  *slash = '\0';
  slash = strrchr(exe, '/'); /* PREFIX/bin -> PREFIX */
  if (!slash || strcmp(slash + 1, "bin")) return;
  *slash = '\0';
  char candidate[sizeof data_dir];
  snprintf(candidate, sizeof candidate, "%s/%s", exe, OBC_DATA_SUBDIR);
  struct stat st;
  if (stat(candidate, &st) == 0 && S_ISDIR(st.st_mode))
    memcpy(data_dir, candidate, sizeof data_dir);
}

const char *obc_data_dir(void) {
  pthread_once(&data_dir_once, find_data_dir);
  return data_dir;
}
