/* Locks, partial folders, manifests and states of a sweep's cells (the
 * protocol is in sweep/cell.h). */
#define _GNU_SOURCE /* nftw's FTW_DEPTH | FTW_PHYS */
#include "sweep/cell.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_hash.h"
#include "common/obc_json.h"
#include "formats/json_file.h"

#define MANIFEST "complete.json"
#define MANIFEST_FORMAT "obcache-sweep-cell/1"
enum { HEARTBEAT_SECONDS = 30, MAX_FILES = 4096 };

const char *sweep_cell_state_name(SweepCellState state) {
  static const char *const names[] = {"missing", "done", "corrupt", "failed", "running"};
  return names[state];
}

static void host_name(char *out, size_t size) {
  if (gethostname(out, size)) snprintf(out, size, "unknown");
  out[size - 1] = '\0';
  for (char *p = out; *p; p++) /* it becomes part of a file name */
    if (*p == '/' || *p == ' ') *p = '_';
}

void sweep_cell_path(const char *dir, const SweepPlanCell *cell, char *out, size_t size) {
  snprintf(out, size, "%s/cells/%zu", dir, cell->id);
}

static void side_path(const char *dir, const SweepPlanCell *cell, const char *suffix, char *out,
                      size_t size) {
  snprintf(out, size, "%s/cells/%zu.%s", dir, cell->id, suffix);
}

/* --- removing folders --------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

void sweep_cell_discard(const char *partial) {
  if (partial && *partial) nftw(partial, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* --- the manifest ------------------------------------------------------- */

typedef struct {
  char *paths[MAX_FILES]; /* relative to the cell folder */
  size_t n;
  size_t root_length; /* of the cell folder's path, plus the slash */
} FileList;

static FileList *walk_list; /* nftw has no user pointer; the walk is single-threaded */

static int collect(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)ftw;
  if (flag != FTW_F || !S_ISREG(st->st_mode)) return 0;
  const char *rel = path + walk_list->root_length;
  if (!strcmp(rel, MANIFEST)) return 0;
  if (walk_list->n == MAX_FILES) return 1;
  walk_list->paths[walk_list->n] = strdup(rel);
  return walk_list->paths[walk_list->n++] ? 0 : 1;
}

static int by_path(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_list(FileList *list) {
  for (size_t i = 0; i < list->n; i++) free(list->paths[i]);
}

static int write_manifest(const char *partial, const SweepPlanCell *cell) {
  FileList list = {.n = 0, .root_length = strlen(partial) + 1};
  walk_list = &list;
  int walked = nftw(partial, collect, 16, FTW_PHYS);
  walk_list = NULL;
  if (walked) {
    free_list(&list);
    return obc_fail(OBC_EIO, "%s: cannot list the cell's files", partial);
  }
  qsort(list.paths, list.n, sizeof *list.paths, by_path);
  cJSON *root = cJSON_CreateObject(), *files = cJSON_CreateArray();
  cJSON_AddStringToObject(root, "format", MANIFEST_FORMAT);
  cJSON_AddNumberToObject(root, "id", (double)cell->id);
  cJSON_AddStringToObject(root, "name", cell->name);
  int rc = 0;
  for (size_t i = 0; i < list.n && !rc; i++) {
    char path[8192], hex[17];
    uint64_t hash = 0, bytes = 0;
    snprintf(path, sizeof path, "%s/%s", partial, list.paths[i]);
    rc = obc_hash_file(path, &hash, &bytes);
    snprintf(hex, sizeof hex, "%016" PRIx64, hash);
    cJSON *file = cJSON_CreateObject();
    cJSON_AddStringToObject(file, "path", list.paths[i]);
    cJSON_AddNumberToObject(file, "bytes", (double)bytes);
    cJSON_AddStringToObject(file, "fnv1a64", hex);
    cJSON_AddItemToArray(files, file);
  }
  cJSON_AddItemToObject(root, "files", files);
  free_list(&list);
  if (rc) {
    cJSON_Delete(root);
    return rc;
  }
  return obc_json_write(partial, MANIFEST, root);
}

/* A manifest path must stay inside the cell: relative, no "..". */
static bool safe_relative(const char *path) {
  if (!*path || path[0] == '/' || strlen(path) > 1024) return false;
  for (const char *p = path; *p; p = strchr(p, '/') ? strchr(p, '/') + 1 : p + strlen(p))
    if (!strncmp(p, "..", 2) && (p[2] == '/' || p[2] == '\0')) return false;
  return true;
}

/* Checks one manifest entry against the file; writes the problem to detail. */
static bool file_matches(const char *cell_dir, const cJSON *entry, char *detail, size_t size) {
  const cJSON *path = cJSON_GetObjectItemCaseSensitive(entry, "path");
  const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(entry, "bytes");
  const cJSON *hash = cJSON_GetObjectItemCaseSensitive(entry, "fnv1a64");
  if (!cJSON_IsString(path) || !safe_relative(path->valuestring) || !cJSON_IsNumber(bytes) ||
      !cJSON_IsString(hash)) {
    snprintf(detail, size, "%s: a malformed entry", MANIFEST);
    return false;
  }
  char file[8192], hex[17];
  snprintf(file, sizeof file, "%s/%s", cell_dir, path->valuestring);
  struct stat st;
  if (stat(file, &st) || !S_ISREG(st.st_mode)) {
    snprintf(detail, size, "%s is missing", path->valuestring);
    return false;
  }
  if ((double)st.st_size != bytes->valuedouble) {
    snprintf(detail, size, "%s has %jd bytes, the manifest says %.0f", path->valuestring,
             (intmax_t)st.st_size, bytes->valuedouble);
    return false;
  }
  uint64_t h = 0, n = 0;
  if (obc_hash_file(file, &h, &n)) {
    obc_error_clear();
    snprintf(detail, size, "%s cannot be read", path->valuestring);
    return false;
  }
  snprintf(hex, sizeof hex, "%016" PRIx64, h);
  if (strcmp(hex, hash->valuestring)) {
    snprintf(detail, size, "%s has checksum %s, the manifest says %.16s", path->valuestring, hex,
             hash->valuestring);
    return false;
  }
  return true;
}

/* Whether the finished cell folder verifies: DONE, CORRUPT or MISSING. */
static SweepCellState verify(const char *cell_dir, const SweepPlanCell *cell, char *detail,
                             size_t size) {
  char path[8192];
  snprintf(path, sizeof path, "%s/%s", cell_dir, MANIFEST);
  cJSON *root = NULL;
  int rc = json_file_read(path, &root);
  if (rc) obc_error_clear();
  if (rc == OBC_ENOTFOUND) return SWEEP_CELL_MISSING;
  const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
  const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
  SweepCellState state = SWEEP_CELL_DONE;
  if (rc || !cJSON_IsString(format) || strcmp(format->valuestring, MANIFEST_FORMAT) ||
      !cJSON_IsNumber(id) || id->valuedouble != (double)cell->id || !cJSON_IsArray(files) ||
      cJSON_GetArraySize(files) == 0) {
    snprintf(detail, size, "%s is not a manifest of cell %zu", MANIFEST, cell->id);
    state = SWEEP_CELL_CORRUPT;
  }
  const cJSON *entry;
  if (state == SWEEP_CELL_DONE) cJSON_ArrayForEach(entry, files) {
      if (!file_matches(cell_dir, entry, detail, size)) {
        state = SWEEP_CELL_CORRUPT;
        break;
      }
    }
  cJSON_Delete(root);
  return state;
}

/* --- locks -------------------------------------------------------------- */

struct SweepCellLock {
  char path[4096];
  pthread_t thread;
  pthread_mutex_t mutex;
  pthread_cond_t stop_cond;
  bool stop;
};

static void *heartbeat(void *arg) {
  SweepCellLock *lock = arg;
  pthread_mutex_lock(&lock->mutex);
  while (!lock->stop) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += HEARTBEAT_SECONDS;
    pthread_cond_timedwait(&lock->stop_cond, &lock->mutex, &until);
    if (!lock->stop) utimensat(AT_FDCWD, lock->path, NULL, 0);
  }
  pthread_mutex_unlock(&lock->mutex);
  return NULL;
}

/* Whether the lock at path is stale; holder gets its content. */
static bool lock_is_stale(const char *path, double stale_after, char *holder, size_t size) {
  char text[512] = "", host[256], my_host[256];
  long pid = 0;
  FILE *fp = fopen(path, "r");
  if (!fp) return false; /* gone meanwhile: try again */
  size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = '\0';
  text[strcspn(text, "\n")] = '\0';
  host[0] = '\0';
  long long since = 0;
  int fields = sscanf(text, "%255s %ld %lld", host, &pid, &since);
  if (fields >= 2)
    snprintf(holder, size, "host %s, pid %ld", host, pid);
  else
    snprintf(holder, size, "\"%.64s\"", text);
  struct stat st;
  if (stat(path, &st)) return false;
  if (difftime(time(NULL), st.st_mtime) > stale_after) return true; /* no heartbeat */
  host_name(my_host, sizeof my_host);
  if (fields >= 2 && !strcmp(host, my_host) && pid > 0)
    return kill((pid_t)pid, 0) && errno == ESRCH; /* its holder ran here and is gone */
  return false;
}

static int create_lock(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    return errno == EEXIST ? 1 : obc_fail(OBC_EIO, "%s: cannot create: %s", path, strerror(errno));
  char text[512], host[256];
  host_name(host, sizeof host);
  int len =
      snprintf(text, sizeof text, "%s %ld %lld\n", host, (long)getpid(), (long long)time(NULL));
  bool ok = write(fd, text, (size_t)len) == len;
  ok = !close(fd) && ok;
  if (!ok) {
    unlink(path);
    return obc_fail(OBC_EIO, "%s: cannot write the lock", path);
  }
  return 0;
}

int sweep_cell_lock(const char *dir, const SweepPlanCell *cell, double stale_after,
                    SweepCellLock **out, char *holder, size_t size) {
  *out = NULL;
  holder[0] = '\0';
  char cells[4096], path[4096];
  snprintf(cells, sizeof cells, "%s/cells", dir);
  side_path(dir, cell, "lock", path, sizeof path);
  int rc = obc_make_dirs(cells);
  for (int attempt = 0; !rc && attempt < 3; attempt++) {
    rc = create_lock(path);
    if (rc <= 0) break; /* taken (0) or an error */
    rc = 0;
    if (!lock_is_stale(path, stale_after, holder, size)) {
      if (attempt == 2 || access(path, F_OK) == 0) return OBC_OK; /* a live holder */
      continue;                                                   /* released meanwhile */
    }
    fprintf(stderr, "sweep: cell %zu: breaking the stale lock of %s\n", cell->id, holder);
    unlink(path);
  }
  if (rc) return rc;
  SweepCellLock *lock = obc_calloc(1, sizeof *lock, "a cell lock");
  if (!lock) {
    unlink(path);
    return OBC_ENOMEM;
  }
  snprintf(lock->path, sizeof lock->path, "%s", path);
  pthread_mutex_init(&lock->mutex, NULL);
  pthread_cond_init(&lock->stop_cond, NULL);
  if (pthread_create(&lock->thread, NULL, heartbeat, lock)) {
    unlink(path);
    free(lock);
    return obc_fail(OBC_EIO, "%s: cannot start the lock's heartbeat", path);
  }
  *out = lock;
  return OBC_OK;
}

void sweep_cell_unlock(SweepCellLock *lock) {
  if (!lock) return;
  pthread_mutex_lock(&lock->mutex);
  lock->stop = true;
  pthread_cond_signal(&lock->stop_cond);
  pthread_mutex_unlock(&lock->mutex);
  pthread_join(lock->thread, NULL);
  unlink(lock->path);
  pthread_mutex_destroy(&lock->mutex);
  pthread_cond_destroy(&lock->stop_cond);
  free(lock);
}

/* --- building a cell ---------------------------------------------------- */

/* Removes DIR/cells/.<id>.partial.* folders: called with the lock held, so
 * their builders are gone (or lost a stale lock and will fail to commit). */
static void remove_partials(const char *dir, const SweepPlanCell *cell) {
  char cells[4096], prefix[64];
  snprintf(cells, sizeof cells, "%s/cells", dir);
  int n = snprintf(prefix, sizeof prefix, ".%zu.partial.", cell->id);
  DIR *d = opendir(cells);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, prefix, (size_t)n)) {
      char path[8192];
      snprintf(path, sizeof path, "%s/%s", cells, e->d_name);
      sweep_cell_discard(path);
    }
  closedir(d);
}

int sweep_cell_begin(const char *dir, const SweepPlanCell *cell, char *partial, size_t size) {
  char host[256];
  host_name(host, sizeof host);
  remove_partials(dir, cell);
  if (snprintf(partial, size, "%s/cells/.%zu.partial.%s.%ld", dir, cell->id, host,
               (long)getpid()) >= (int)size)
    return obc_fail(OBC_EINVAL, "%s: path too long", dir);
  return obc_make_dirs(partial);
}

int sweep_cell_commit(const char *dir, const SweepPlanCell *cell, const char *partial) {
  int rc = write_manifest(partial, cell);
  if (rc) return rc;
  char final[4096], failed[4096], aside[4096], detail[512];
  sweep_cell_path(dir, cell, final, sizeof final);
  side_path(dir, cell, "failed", failed, sizeof failed);
  if (rename(partial, final) == 0) {
    unlink(failed);
    return OBC_OK;
  }
  if (errno != EEXIST && errno != ENOTEMPTY)
    return obc_fail(OBC_EIO, "%s: cannot rename to %s: %s", partial, final, strerror(errno));
  if (verify(final, cell, detail, sizeof detail) == SWEEP_CELL_DONE) {
    sweep_cell_discard(partial); /* another process finished it first */
    return OBC_OK;
  }
  /* A corrupt or incomplete earlier result: move it aside, then replace it. */
  snprintf(aside, sizeof aside, "%s.bad.%ld", partial, (long)getpid());
  if (rename(final, aside) || rename(partial, final))
    return obc_fail(OBC_EIO, "%s: cannot replace the damaged cell: %s", final, strerror(errno));
  sweep_cell_discard(aside);
  unlink(failed);
  return OBC_OK;
}

int sweep_cell_record_failure(const char *dir, const SweepPlanCell *cell, const char *message) {
  char path[4096], host[256];
  side_path(dir, cell, "failed", path, sizeof path);
  host_name(host, sizeof host);
  ObcPendingFile pending;
  FILE *fp = NULL;
  int rc = obc_text_open(&pending, path, &fp);
  if (rc) return rc;
  fprintf(fp, "%s (host %s, pid %ld)\n", message, host, (long)getpid());
  return obc_text_close(&pending, fp, 1);
}

/* --- states ------------------------------------------------------------- */

static void read_failure(const char *path, char *detail, size_t size) {
  FILE *fp = fopen(path, "r");
  if (!fp) return;
  if (!fgets(detail, (int)size, fp)) detail[0] = '\0';
  detail[strcspn(detail, "\n")] = '\0';
  fclose(fp);
}

int sweep_cell_state(const char *dir, const SweepPlanCell *cell, double stale_after,
                     SweepCellState *state, char *detail, size_t size) {
  char final[4096], path[4096];
  detail[0] = '\0';
  sweep_cell_path(dir, cell, final, sizeof final);
  *state = verify(final, cell, detail, size);
  if (*state != SWEEP_CELL_MISSING) return 0;
  side_path(dir, cell, "lock", path, sizeof path);
  if (access(path, F_OK) == 0) {
    char holder[512] = "";
    bool stale = lock_is_stale(path, stale_after, holder, sizeof holder);
    snprintf(detail, size, "%s%s", stale ? "interrupted, stale lock of " : "locked by ", holder);
    if (!stale) {
      *state = SWEEP_CELL_RUNNING;
      return 0;
    }
  }
  side_path(dir, cell, "failed", path, sizeof path);
  if (access(path, F_OK) == 0) {
    *state = SWEEP_CELL_FAILED;
    read_failure(path, detail, size);
  }
  return 0;
}
