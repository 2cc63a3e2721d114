/* Pending (write-then-rename) files and mkdir -p; see obc_file.h. */
#include "common/obc_file.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/obc_error.h"

#define OBC_MAX_PENDING 64
static ObcPendingFile *volatile pending_files[OBC_MAX_PENDING];
static volatile sig_atomic_t handler_installed;
static volatile pid_t pending_children[OBC_MAX_CHILDREN];

static void remove_pending_on_signal(int sig) {
  for (int i = 0; i < OBC_MAX_CHILDREN; i++) {
    pid_t child = pending_children[i];
    if (child <= 0) continue;
    kill(child, SIGKILL); /* kill and waitpid are async-signal-safe */
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  for (int i = 0; i < OBC_MAX_PENDING; i++)
    if (pending_files[i]) unlink(pending_files[i]->temp_path);
  signal(sig, SIG_DFL);
  raise(sig);
}

void obc_pending_register(ObcPendingFile *file) {
  if (!handler_installed) {
    /* Ctrl-C, kill, a closed terminal or ssh session (HUP), Ctrl-\ (QUIT).
     * A signal already ignored stays ignored: nohup's HUP, a background
     * job's INT. */
    static const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
      if (signal(signals[i], remove_pending_on_signal) == SIG_IGN) signal(signals[i], SIG_IGN);
    handler_installed = 1;
  }
  for (int i = 0; i < OBC_MAX_PENDING; i++)
    if (!pending_files[i]) {
      pending_files[i] = file;
      return;
    }
}

void obc_pending_child_add(pid_t child) {
  for (int i = 0; i < OBC_MAX_CHILDREN; i++)
    if (pending_children[i] <= 0) {
      pending_children[i] = child;
      return;
    }
  assert(!"more than OBC_MAX_CHILDREN pending children");
}

void obc_pending_child_remove(pid_t child) {
  for (int i = 0; i < OBC_MAX_CHILDREN; i++)
    if (pending_children[i] == child) pending_children[i] = 0;
}

void obc_pending_unregister(ObcPendingFile *file) {
  for (int i = 0; i < OBC_MAX_PENDING; i++)
    if (pending_files[i] == file) pending_files[i] = NULL;
}

int obc_pending_init(ObcPendingFile *file, const char *final_path) {
  if (!final_path || !final_path[0]) return obc_fail(OBC_EINVAL, "empty output path");
  if (strlen(final_path) + 32 >= sizeof file->final_path)
    return obc_fail(OBC_EINVAL, "%s: output path too long", final_path);
  snprintf(file->final_path, sizeof file->final_path, "%s", final_path);
  snprintf(file->temp_path, sizeof file->temp_path, "%s.tmp.%ld", final_path, (long)getpid());
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", final_path);
  char *slash = strrchr(dir, '/');
  if (slash == dir)
    dir[1] = '\0';
  else if (slash)
    *slash = '\0';
  else
    snprintf(dir, sizeof dir, ".");
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return obc_fail(OBC_EIO, "%s: cannot write: folder %s does not exist", final_path, dir);
  if (access(dir, W_OK) != 0)
    return obc_fail(OBC_EIO, "%s: cannot write: folder %s is not writable", final_path, dir);
  if (stat(final_path, &st) == 0 && S_ISDIR(st.st_mode))
    return obc_fail(OBC_EIO, "%s: cannot write: it is a folder", final_path);
  return OBC_OK;
}

int obc_pending_commit(ObcPendingFile *file) {
  if (rename(file->temp_path, file->final_path) != 0) {
    int err = errno;
    unlink(file->temp_path);
    return obc_fail(OBC_EIO, "%s: cannot rename %s into place: %s", file->final_path,
                    file->temp_path, strerror(err));
  }
  obc_pending_unregister(file);
  return OBC_OK;
}

void obc_pending_abort(ObcPendingFile *file) {
  if (file->temp_path[0]) unlink(file->temp_path);
  obc_pending_unregister(file);
}

int obc_text_open(ObcPendingFile *file, const char *final_path, FILE **out) {
  int rc = obc_pending_init(file, final_path);
  if (rc) return rc;
  obc_pending_register(file); /* before the file exists: a signal may come at once */
  FILE *fp = fopen(file->temp_path, "w");
  if (!fp) {
    int err = errno;
    obc_pending_unregister(file);
    return obc_fail(OBC_EIO, "%s: cannot create %s: %s", final_path, file->temp_path,
                    strerror(err));
  }
  *out = fp;
  return OBC_OK;
}

int obc_text_open_in(ObcPendingFile *file, const char *dir, const char *name, FILE **out) {
  char path[sizeof file->final_path];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
    return obc_fail(OBC_EINVAL, "%s: output path too long", dir);
  return obc_text_open(file, path, out);
}

/* Closes fp, the stream of file's temporary name; fails, naming the file,
 * when a write or the close failed (disk full, file-size limit). */
static int pending_close(const ObcPendingFile *file, FILE *fp) {
  int failed = ferror(fp);
  errno = 0;
  if (fclose(fp) != 0) failed = 1;
  int err = errno;
  if (failed)
    return obc_fail(OBC_EIO, "%s: write failed: %s", file->final_path,
                    obc_write_error_text(file->temp_path, err));
  return OBC_OK;
}

int obc_text_close(ObcPendingFile *file, FILE *fp, int ok) {
  if (!ok) {
    fclose(fp);
    obc_pending_abort(file);
    return OBC_OK;
  }
  int rc = pending_close(file, fp);
  if (rc) {
    obc_pending_abort(file);
    return rc;
  }
  return obc_pending_commit(file);
}

int obc_file_check_space(const char *path, double bytes, const char *what) {
  const double MiB = 1024.0 * 1024.0;
  struct rlimit limit;
  if (!getrlimit(RLIMIT_FSIZE, &limit) && limit.rlim_cur != RLIM_INFINITY &&
      (double)limit.rlim_cur < bytes)
    return obc_fail(OBC_EIO,
                    "%s: %s needs about %.1f MiB, beyond the file-size limit of %.1f MiB "
                    "(ulimit -f)",
                    path, what, bytes / MiB, (double)limit.rlim_cur / MiB);
  char folder[4096];
  snprintf(folder, sizeof folder, "%s", path);
  char *slash = strrchr(folder, '/');
  if (!slash)
    snprintf(folder, sizeof folder, ".");
  else if (slash == folder)
    folder[1] = '\0';
  else
    *slash = '\0';
  struct statvfs fs;
  if (!statvfs(folder, &fs) && (double)fs.f_bavail * (double)fs.f_frsize < bytes)
    return obc_fail(OBC_EIO, "%s: disk full: %s needs about %.1f MiB, %.1f MiB free in %s", path,
                    what, bytes / MiB, (double)fs.f_bavail * (double)fs.f_frsize / MiB, folder);
  return OBC_OK;
}

const char *obc_write_error_text(const char *path, int err) {
  struct stat st;
  struct rlimit limit;
  struct statvfs fs;
  if (err != ENOSPC && err != EFBIG && path) {
    if (!stat(path, &st) && !getrlimit(RLIMIT_FSIZE, &limit) && limit.rlim_cur != RLIM_INFINITY &&
        (rlim_t)st.st_size >= limit.rlim_cur)
      err = EFBIG; /* sequential writes stop exactly at the limit */
    else if (!statvfs(path, &fs) && fs.f_bavail == 0)
      err = ENOSPC;
  }
  if (err == ENOSPC) return "disk full";
  if (err == EFBIG) return "file size limit exceeded (ulimit -f)";
  return err ? strerror(err) : "I/O error";
}

int obc_make_dirs(const char *path) {
  char buf[4096];
  if (strlen(path) >= sizeof buf) return obc_fail(OBC_EINVAL, "%s: path too long", path);
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
      return obc_fail(OBC_EIO, "%s: cannot create folder %s: %s", path, buf, strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST)
    return obc_fail(OBC_EIO, "%s: cannot create folder: %s", path, strerror(errno));
  struct stat st;
  if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    return obc_fail(OBC_EIO, "%s: exists and is not a folder", path);
  return OBC_OK;
}

int obc_file_map(const char *path, const void **map, size_t *size) {
  *map = NULL;
  *size = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    int err = errno;
    return obc_fail(err == ENOENT ? OBC_ENOTFOUND : OBC_EIO, "%s: cannot open (%s)", path,
                    strerror(err));
  }
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    return obc_fail(OBC_EIO, "%s: not a regular file", path);
  }
  size_t bytes = (size_t)st.st_size;
  if (bytes > 0) {
    void *mapped = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      int err = errno;
      close(fd);
      return obc_fail(OBC_EIO, "%s: cannot memory-map (%s)", path, strerror(err));
    }
    *map = mapped;
  }
  close(fd);
  *size = bytes;
  return OBC_OK;
}

void obc_file_unmap(const void *map, size_t size) {
  if (map) munmap((void *)map, size);
}

void obc_path_beside(const char *path, const char *suffix, char *out, size_t size) {
  size_t n = strlen(path);
  if (n > 3 && !strcmp(path + n - 3, ".h5")) n -= 3;
  snprintf(out, size, "%.*s%s", (int)n, path, suffix);
}

int obc_output_begin(ObcOutputSet *set, const char *dir) {
  set->count = 0;
  set->created = 0;
  set->dir[0] = '\0';
  if ((size_t)snprintf(set->dir, sizeof set->dir, "%s", dir) >= sizeof set->dir)
    return obc_fail(OBC_EINVAL, "%s: output path too long", dir);
  struct stat st;
  int existed = stat(dir, &st) == 0;
  int rc = obc_make_dirs(dir);
  set->created = !rc && !existed;
  return rc;
}

int obc_output_open(ObcOutputSet *set, const char *name, FILE **fp) {
  if (set->count == OBC_OUTPUT_MAX)
    return obc_fail(OBC_EINVAL, "%s/%s: more than %d files in one output set", set->dir, name,
                    OBC_OUTPUT_MAX);
  int rc = obc_text_open_in(&set->files[set->count], set->dir, name, fp);
  if (!rc) set->count++;
  return rc;
}

int obc_output_close(ObcOutputSet *set, FILE *fp) {
  return pending_close(&set->files[set->count - 1], fp);
}

const char *obc_output_name(const ObcOutputSet *set, size_t i) {
  const char *path = set->files[i].final_path, *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

int obc_output_commit(ObcOutputSet *set) {
  for (size_t i = 0; i < set->count; i++) {
    int rc = obc_pending_commit(&set->files[i]);
    if (rc) {
      for (size_t j = 0; j < i; j++) remove(set->files[j].final_path);
      set->files[i].temp_path[0] = '\0'; /* commit already removed it */
      obc_output_abort(set);
      return rc;
    }
  }
  set->count = 0;
  return OBC_OK;
}

void obc_output_abort(ObcOutputSet *set) {
  for (size_t i = 0; i < set->count; i++) obc_pending_abort(&set->files[i]);
  set->count = 0;
  if (set->created) rmdir(set->dir); /* fails, as it should, when something else is in it */
  set->created = 0;
}

int obc_output_end(ObcOutputSet *set, int rc) {
  if (!rc) return obc_output_commit(set);
  obc_output_abort(set);
  return rc;
}

int obc_spawn_logged(const char *path, char *const argv[], char *const envp[], int log_fd,
                     pid_t *child_out) {
  fflush(NULL);
  pid_t parent = getpid();
  (void)parent; /* read by the child on Linux */
  sigset_t stop, saved;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  sigaddset(&stop, SIGQUIT);
  sigprocmask(SIG_BLOCK, &stop, &saved);
  pid_t child = fork();
  int err = child < 0 ? errno : 0;
  if (child > 0) obc_pending_child_add(child);
  if (child != 0) sigprocmask(SIG_SETMASK, &saved, NULL);
  if (child < 0) return err;
  if (child == 0) {
#ifdef __linux__
    /* The child dies with us (Ctrl-C, kill), so that it cannot go on to
     * write after our signal handler removed the temporary files. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
#endif
    sigprocmask(SIG_SETMASK, &saved, NULL);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    if (envp)
      execve(path, argv, envp);
    else
      execv(path, argv);
    _exit(127);
  }
  *child_out = child;
  return 0;
}
