/* Locates gnuplot on PATH and runs figure scripts in child processes (see
 * plot_gnuplot.h). Each child's output goes to a log file so that a failure
 * can be reported as one line (gnuplot's own last message) and a success
 * stays quiet. */
#include "plots/plot_gnuplot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"

int plot_gnuplot_find(PlotGnuplot *gnuplot) {
  const char *path = getenv("PATH");
  char dirs[8192];
  snprintf(dirs, sizeof dirs, "%s", path ? path : "");
  char *save = NULL;
  for (char *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    char candidate[4096];
    if ((size_t)snprintf(candidate, sizeof candidate, "%s/gnuplot", dir[0] ? dir : ".") >=
        sizeof candidate)
      continue;
    struct stat st;
    if (stat(candidate, &st) == 0 && S_ISREG(st.st_mode) && access(candidate, X_OK) == 0) {
      snprintf(gnuplot->path, sizeof gnuplot->path, "%s", candidate);
      return OBC_OK;
    }
  }
  return obc_fail(OBC_ENOTFOUND,
                  "gnuplot not found on PATH; install gnuplot-nox (apt-get install gnuplot-nox)");
}

/* The last non-empty line of the log that names a problem (gnuplot writes
 * `"script" line N: message`), else its last non-empty line. */
static void last_message(const char *log_path, char *out, size_t size) {
  out[0] = '\0';
  FILE *fp = fopen(log_path, "r");
  if (!fp) return;
  char line[1024], last[1024] = "", last_error[1024] = "";
  while (fgets(line, sizeof line, fp)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (!line[0] || strspn(line, " ^") == strlen(line)) continue;
    snprintf(last, sizeof last, "%s", line);
    if (strstr(line, " line ") && !strstr(line, "warning:"))
      snprintf(last_error, sizeof last_error, "%s", line);
  }
  fclose(fp);
  snprintf(out, size, "%s", last_error[0] ? last_error : last);
}

int plot_gnuplot_start(const PlotGnuplot *gnuplot, const char *script, const char *assignments,
                       const char *log_path, pid_t *child_out) {
  int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (log_fd < 0)
    return obc_fail(OBC_EIO, "%s: cannot create gnuplot's log: %s", log_path, strerror(errno));
  char *argv[] = {"gnuplot", "-e", (char *)assignments, (char *)script, NULL};
  pid_t child = 0;
  int err = obc_spawn_logged(gnuplot->path, argv, NULL, log_fd, &child);
  if (err) {
    close(log_fd);
    unlink(log_path);
    return obc_fail(OBC_EEXTERNAL, "%s: cannot start gnuplot: %s", script, strerror(err));
  }
  close(log_fd);
  *child_out = child;
  return OBC_OK;
}

int plot_gnuplot_wait(pid_t *child, int *status) {
  pid_t done;
  while ((done = waitpid(-1, status, 0)) < 0)
    if (errno != EINTR)
      return obc_fail(OBC_EEXTERNAL, "lost the gnuplot processes: %s", strerror(errno));
  obc_pending_child_remove(done);
  *child = done;
  return OBC_OK;
}

int plot_gnuplot_outcome(const char *script, int status, const char *log_path, char *message,
                         size_t size) {
  char last[1024];
  last_message(log_path, last, sizeof last);
  unlink(log_path);
  if (WIFSIGNALED(status)) {
    snprintf(message, size, "%s: gnuplot killed by signal %d", script, WTERMSIG(status));
    return OBC_EEXTERNAL;
  }
  if (WEXITSTATUS(status) != 0) {
    snprintf(message, size, "%s: gnuplot failed (exit status %d): %s", script, WEXITSTATUS(status),
             last[0] ? last : "no message");
    return OBC_EEXTERNAL;
  }
  message[0] = '\0';
  return OBC_OK;
}

void plot_args_init(PlotArgs *args) {
  args->text[0] = '\0';
  args->used = 0;
  args->overflow = 0;
}

static void args_append(PlotArgs *args, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void args_append(PlotArgs *args, const char *fmt, ...) {
  if (args->overflow) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(args->text + args->used, sizeof args->text - args->used, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof args->text - args->used) {
    args->overflow = 1;
    args->text[args->used] = '\0';
    return;
  }
  args->used += (size_t)n;
}

void plot_args_string(PlotArgs *args, const char *name, const char *value) {
  args_append(args, "%s='", name);
  for (const char *p = value; *p; p++) {
    if (*p == '\n' || *p == '\r') continue; /* one line per assignment */
    if (*p == '\'')
      args_append(args, "''");
    else
      args_append(args, "%c", *p);
  }
  args_append(args, "'; ");
}

void plot_args_size(PlotArgs *args, const char *name, size_t value) {
  args_append(args, "%s=%zu; ", name, value);
}

void plot_args_double(PlotArgs *args, const char *name, double value) {
  args_append(args, "%s=%.6g; ", name, value);
}

int plot_args_check(const PlotArgs *args) {
  if (args->overflow)
    return obc_fail(OBC_EINVAL,
                    "gnuplot arguments longer than %zu bytes (too many scores or a very "
                    "long path?)",
                    sizeof args->text);
  return OBC_OK;
}
