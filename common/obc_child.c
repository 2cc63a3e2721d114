/* obc_child_run (common/obc_child.h). The child writes the work's bytes,
 * then a trailer (message, its length, the return code and a magic word) and
 * exits with _exit(0); the parent reads until end of file or the deadline,
 * so a child that dies halfway leaves no trailer and is a failure, whatever
 * it sent. */
#include "common/obc_child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/obc_error.h"

#define TRAILER_MAGIC 0x6f62636368696c64ull /* "obcchild" */
/* The most a child may send: far above a keep set or a trace's strings. */
#define MAX_REPLY ((size_t)1 << 31)

#if defined(__SANITIZE_ADDRESS__)
#define OBC_CHILD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OBC_CHILD_ASAN 1
#endif
#endif

static int in_child;

/* The sanitizers' report destination (ASan, UBSan, LSan), when linked in. */
extern void __sanitizer_set_report_path(const char *path) __attribute__((weak));

int obc_child_active(void) { return in_child; }

typedef struct {
  uint32_t message_size;
  int32_t rc;
  uint64_t magic;
} Trailer;

int obc_child_send(int fd, const void *data, size_t size) {
  const char *p = data;
  while (size) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return obc_fail(OBC_EIO, "cannot reply to the parent process: %s", strerror(errno));
    p += n;
    size -= (size_t)n;
  }
  return OBC_OK;
}

#ifndef OBC_CHILD_ASAN
/* Pages of address space this process maps now (/proc/self/statm), in
 * bytes; 0 when unknown. */
static size_t mapped_bytes(void) {
  FILE *fp = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (fp) {
    if (fscanf(fp, "%lu", &pages) != 1) pages = 0;
    fclose(fp);
  }
  return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}
#endif

static void limit_memory(size_t extra) {
#ifdef OBC_CHILD_ASAN
  /* ASan reserves terabytes of shadow memory: an address-space limit would
   * stop it at once. Its own allocator refuses impossible requests. */
  (void)extra;
#else
  if (!extra) return;
  size_t now = mapped_bytes();
  struct rlimit limit = {.rlim_cur = now + extra, .rlim_max = now + extra};
  setrlimit(RLIMIT_AS, &limit);
#endif
}

_Noreturn static void child_main(ObcChildWork work, void *arg, const ObcChildLimits *limits,
                                 int fd) {
  in_child = 1;
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the parent */
  /* A crash inside HDF5 is how a damaged file ends the child, and the parent
   * reports it: the child's stderr, and with it a sanitizer's report of that
   * crash (which would otherwise go to its log_path), is discarded, unless
   * OBC_CHILD_STDERR=1 asks to see them. */
  const char *keep = getenv("OBC_CHILD_STDERR");
  if (!keep || strcmp(keep, "1")) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDERR_FILENO);
    if (__sanitizer_set_report_path) __sanitizer_set_report_path("stderr");
  }
  limit_memory(limits->memory_bytes);
  obc_error_clear();
  int rc = work(arg, fd);
  const char *message = rc ? obc_error_message() : "";
  Trailer trailer = {.message_size = (uint32_t)strlen(message), .rc = rc, .magic = TRAILER_MAGIC};
  if (obc_child_send(fd, message, trailer.message_size) ||
      obc_child_send(fd, &trailer, sizeof trailer))
    _exit(3);
  _exit(0);
}

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Reads the pipe into reply until end of file; 1 at the deadline or when
 * the reply is too large, 0 at end of file. */
static int read_reply(int fd, double deadline, ObcChildReply *reply, int *nomem) {
  size_t capacity = 0;
  for (;;) {
    double left = deadline - now_seconds();
    if (left <= 0) return 1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ready = poll(&p, 1, (int)(left * 1000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue; /* the deadline is checked above */
    if (reply->size == capacity) {
      if (capacity >= MAX_REPLY) return 1;
      size_t grown = capacity ? 2 * capacity : 65536;
      unsigned char *data = realloc(reply->data, grown);
      if (!data) {
        *nomem = 1;
        return 1;
      }
      reply->data = data;
      capacity = grown;
    }
    ssize_t n = read(fd, reply->data + reply->size, capacity - reply->size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    reply->size += (size_t)n;
  }
}

int obc_child_run(ObcChildWork work, void *arg, const ObcChildLimits *limits,
                  ObcChildReply *reply) {
  memset(reply, 0, sizeof *reply);
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0 || fcntl(pipe_fds[0], F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(pipe_fds[1], F_SETFD, FD_CLOEXEC) != 0)
    return obc_fail(OBC_EIO, "cannot create a pipe for a child process: %s", strerror(errno));
  fflush(NULL); /* nothing buffered is written twice */
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(pipe_fds[0]), close(pipe_fds[1]);
    return obc_fail(OBC_EIO, "cannot start a child process: %s", strerror(err));
  }
  if (pid == 0) {
    close(pipe_fds[0]);
    child_main(work, arg, limits, pipe_fds[1]);
  }
  close(pipe_fds[1]);
  reply->pid = pid;
  int nomem = 0;
  double deadline = now_seconds() + limits->seconds;
  int overrun = read_reply(pipe_fds[0], deadline, reply, &nomem);
  close(pipe_fds[0]);
  int status = 0;
  if (!overrun) {
    /* The pipe closed: the child is exiting, or hangs after closing it. */
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (now_seconds() >= deadline) {
        overrun = 1;
        break;
      }
      struct timespec pause = {0, 1000000};
      nanosleep(&pause, NULL);
    }
  }
  if (overrun) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    reply->timed_out = !nomem;
    if (nomem) return obc_fail(OBC_ENOMEM, "out of memory reading a child process's reply");
    return OBC_EEXTERNAL;
  }
  Trailer trailer;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply->size < sizeof trailer)
    return OBC_EEXTERNAL;
  memcpy(&trailer, reply->data + reply->size - sizeof trailer, sizeof trailer);
  if (trailer.magic != TRAILER_MAGIC || trailer.message_size > reply->size - sizeof trailer)
    return OBC_EEXTERNAL;
  reply->size -= sizeof trailer + trailer.message_size;
  reply->finished = 1;
  if (!trailer.rc) return OBC_OK;
  return obc_fail(trailer.rc, "%.*s", (int)trailer.message_size,
                  (const char *)reply->data + reply->size);
}

void obc_child_reply_free(ObcChildReply *reply) {
  free(reply->data);
  reply->data = NULL;
  reply->size = 0;
}
