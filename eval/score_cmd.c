/* Scores from a command, one run per eval sample (eval/score_cmd.h). */
#include "eval/score_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_text.h"
#include "evict/score_file.h"
#include "scores/scores_read.h"

extern char **environ;

/* The variables a command is given, in the order of the header. */
static const char *const VARIABLES[] = {"OBC_TRACE",  "OBC_SCORES", "OBC_SCORE_NAME",
                                        "OBC_PROMPT", "OBC_MODEL",  "OBC_SAMPLE"};
enum { N_VARIABLES = sizeof VARIABLES / sizeof *VARIABLES };

int eval_score_cmd_parse(const char *option, const char *text, EvalScoreCmd *cmd) {
  char shown[96];
  obc_text_escape(shown, sizeof shown, text, false);
  const char *eq = strchr(text, '=');
  if (!eq) return obc_fail(OBC_EINVAL, "%s %s: expected NAME=CMD", option, shown);
  size_t len = (size_t)(eq - text);
  if (!scores_file_name_valid(text, len))
    return obc_fail(OBC_EINVAL, "%s %s: NAME must have 1..%d of A-Z a-z 0-9 _ . -", option, shown,
                    SCORES_FILE_NAME_MAX);
  if (strspn(eq + 1, " \t") == strlen(eq + 1))
    return obc_fail(OBC_EINVAL, "%s %s: CMD is empty", option, shown);
  memset(cmd, 0, sizeof *cmd);
  memcpy(cmd->name, text, len);
  cmd->command = eq + 1;
  return OBC_OK;
}

/* path made absolute (the file exists) into out. */
static int absolute(const char *path, char *out) {
  if (realpath(path, out)) return OBC_OK;
  return obc_fail(OBC_EIO, "%s: %s", path, strerror(errno));
}

/* The last non-empty line of the log (at most 200 bytes of it), escaped. */
static void log_tail(const char *log, char *out, size_t size) {
  char line[4096], last[4096] = "";
  FILE *fp = fopen(log, "r");
  while (fp && fgets(line, sizeof line, fp)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (strspn(line, " \t") < strlen(line)) snprintf(last, sizeof last, "%.200s", line);
  }
  if (fp) fclose(fp);
  obc_text_escape(out, size, last, false);
}

/* environ without the variables, then each variable=value: (N + 1) entries
 * into envp, their texts into text. NULL when out of memory. */
static char **environment(const char *const *values, char **text_out) {
  size_t n = 0, bytes = 0;
  for (char **e = environ; *e; e++) n++;
  for (size_t v = 0; v < N_VARIABLES; v++) bytes += strlen(VARIABLES[v]) + strlen(values[v]) + 2;
  char **envp = calloc(n + N_VARIABLES + 1, sizeof *envp), *text = malloc(bytes);
  if (!envp || !text) {
    free(envp);
    free(text);
    return NULL;
  }
  size_t k = 0;
  for (char **e = environ; *e; e++) {
    bool ours = false;
    for (size_t v = 0; v < N_VARIABLES && !ours; v++) {
      size_t len = strlen(VARIABLES[v]);
      ours = !strncmp(*e, VARIABLES[v], len) && (*e)[len] == '=';
    }
    if (!ours) envp[k++] = *e;
  }
  char *p = text;
  for (size_t v = 0; v < N_VARIABLES; v++) {
    envp[k++] = p;
    p += sprintf(p, "%s=%s", VARIABLES[v], values[v]) + 1;
  }
  *text_out = text;
  return envp;
}

/* Runs /bin/sh -c command with envp, output into log; its wait status. */
static int run_shell(const char *command, char **envp, const char *log, int *status) {
  int log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return obc_fail(OBC_EIO, "%s: cannot create: %s", log, strerror(errno));
  char *argv[] = {"sh", "-c", (char *)command, NULL};
  pid_t child = 0;
  int err = obc_spawn_logged("/bin/sh", argv, envp, log_fd, &child);
  if (err) {
    close(log_fd);
    return obc_fail(OBC_EEXTERNAL, "cannot start /bin/sh: %s", strerror(err));
  }
  close(log_fd);
  pid_t done;
  while ((done = waitpid(child, status, 0)) < 0 && errno == EINTR) continue;
  obc_pending_child_remove(child);
  if (done < 0) return obc_fail(OBC_EEXTERNAL, "lost the command's process: %s", strerror(errno));
  return OBC_OK;
}

/* One command for the sample: runs it, checks how it ended and that it
 * wrote its file, and points its NAME at the file. */
static int run_one(const EvalScoreCmd *cmd, const char *const *values, const char *log) {
  char *text = NULL, **envp = environment(values, &text);
  if (!envp) return obc_fail(OBC_ENOMEM, "out of memory for the command's environment");
  int status = 0, rc = run_shell(cmd->command, envp, log, &status);
  free(envp);
  free(text);
  if (rc) return rc;
  char tail[1024];
  log_tail(log, tail, sizeof tail);
  const char *scores = values[1];
  struct stat st;
  if (WIFSIGNALED(status))
    return obc_fail(OBC_EEXTERNAL, "killed by signal %d%s%s", WTERMSIG(status), *tail ? ": " : "",
                    tail);
  if (WEXITSTATUS(status))
    return obc_fail(OBC_EEXTERNAL, "exited with status %d%s%s", WEXITSTATUS(status),
                    *tail ? ": " : "", tail);
  if (stat(scores, &st) || !S_ISREG(st.st_mode))
    return obc_fail(OBC_EEXTERNAL, "exited 0 without writing $OBC_SCORES (%s)", scores);
  if (stat(log, &st) == 0 && st.st_size == 0) unlink(log);
  return evict_score_file_set(cmd->name, scores, "");
}

/* dir/what-NAME.ext into out. */
static int cmd_path(const char *dir, const char *what, const char *name, const char *ext, char *out,
                    size_t size) {
  if (snprintf(out, size, "%s/%s-%s.%s", dir, what, name, ext) < (int)size) return OBC_OK;
  return obc_fail(OBC_EINVAL, "%s: path too long", dir);
}

int eval_score_cmds_run(const EvalConfig *c, const char *model_path, const char *sample,
                        const char *dir, const char *trace) {
  if (!c->n_score_cmds) return OBC_OK;
  char dir_abs[PATH_MAX], trace_abs[PATH_MAX], model_abs[PATH_MAX], prompt[PATH_MAX + 16];
  int rc = absolute(dir, dir_abs);
  if (!rc) rc = absolute(trace, trace_abs);
  if (rc) return rc;
  if (!realpath(model_path, model_abs)) snprintf(model_abs, sizeof model_abs, "%s", model_path);
  snprintf(prompt, sizeof prompt, "%s/prompt.json", dir_abs);
  for (size_t i = 0; i < c->n_score_cmds && !rc; i++) {
    const EvalScoreCmd *cmd = &c->score_cmds[i];
    char scores[PATH_MAX + 64], log[PATH_MAX + 64];
    rc = cmd_path(dir_abs, "scores", cmd->name, "h5", scores, sizeof scores);
    if (!rc) rc = cmd_path(dir_abs, "score-cmd", cmd->name, "log", log, sizeof log);
    if (rc) break;
    unlink(scores); /* what a run before an interruption left */
    const char *values[N_VARIABLES] = {trace_abs, scores, cmd->name, prompt, model_abs, sample};
    rc = run_one(cmd, values, log);
    if (rc) {
      char shown[96];
      obc_fail_context(rc, "--score-cmd %s",
                       obc_text_escape(shown, sizeof shown, cmd->name, false));
    }
  }
  return rc;
}

void eval_score_cmds_clean(const EvalConfig *c, const char *dir) {
  for (size_t i = 0; i < c->n_score_cmds; i++) {
    char scores[PATH_MAX + 64];
    if (!cmd_path(dir, "scores", c->score_cmds[i].name, "h5", scores, sizeof scores))
      unlink(scores);
  }
}
