/* Scores from a file (evict/score_file.h): the names recorded from
 * NAME=file:PATH[:DATASET] and the row's scores. */
#include "evict/score_file.h"

#include <stdio.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_text.h"
#include "scores/scores_read.h"

typedef struct {
  char name[EVICT_FILE_NAME_MAX + 1];
  char path[1024];
  char dataset[128];
} FileScore;

/* Recorded while the command line is parsed, read afterwards. */
static FileScore recorded[EVICT_FILE_MAX_SCORES];
static size_t n_recorded;

static const FileScore *find(const char *name) {
  for (size_t i = 0; i < n_recorded; i++)
    if (!strcmp(recorded[i].name, name)) return &recorded[i];
  return NULL;
}

bool evict_score_file_spelled(const char *text) {
  const char *eq = strchr(text, '=');
  return eq && !strncmp(eq + 1, EVICT_FILE_PREFIX, strlen(EVICT_FILE_PREFIX));
}

int evict_score_file_resolve(const char *text, char *name_out, size_t size) {
  char shown[96];
  obc_text_escape(shown, sizeof shown, text, false);
  if (!evict_score_file_spelled(text)) {
    if (!find(text)) return obc_fail(OBC_EINVAL, "--score %s: no file recorded for it", shown);
    snprintf(name_out, size, "%s", text);
    return OBC_OK;
  }
  FileScore s;
  memset(&s, 0, sizeof s);
  size_t len = strcspn(text, "=");
  if (len == 0 || len > EVICT_FILE_NAME_MAX)
    return obc_fail(OBC_EINVAL, "--score %s: NAME of NAME=file:PATH must have 1..%d characters",
                    shown, EVICT_FILE_NAME_MAX);
  for (size_t i = 0; i < len; i++) {
    char c = text[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return obc_fail(OBC_EINVAL,
                      "--score %s: NAME of NAME=file:PATH may hold only A-Z a-z 0-9 _ . -", shown);
  }
  memcpy(s.name, text, len);
  if (evict_source_find(s.name, len) || !strcmp(s.name, "file"))
    return obc_fail(OBC_EINVAL,
                    "--score %s: %s is a built-in score's name (obcache evict --list-scores); "
                    "name the file's score otherwise",
                    shown, s.name);
  const char *rest = text + len + 1 + strlen(EVICT_FILE_PREFIX);
  const char *colon = strrchr(rest, ':');
  size_t path_len = strlen(rest);
  if (colon && !strchr(colon + 1, '/')) {
    path_len = (size_t)(colon - rest);
    if (strlen(colon + 1) >= sizeof s.dataset)
      return obc_fail(OBC_EINVAL, "--score %s: DATASET longer than %zu characters", shown,
                      sizeof s.dataset - 1);
    snprintf(s.dataset, sizeof s.dataset, "%s", colon + 1);
  }
  if (path_len == 0 || path_len >= sizeof s.path)
    return obc_fail(OBC_EINVAL,
                    "--score %s: expected NAME=file:PATH[:DATASET] with a PATH of "
                    "1..%zu characters",
                    shown, sizeof s.path - 1);
  memcpy(s.path, rest, path_len);
  const FileScore *known = find(s.name);
  if (known && (strcmp(known->path, s.path) || strcmp(known->dataset, s.dataset)))
    return obc_fail(OBC_EINVAL, "--score %s: %s already names %s%s%s", shown, s.name, known->path,
                    *known->dataset ? ":" : "", known->dataset);
  if (!known) {
    if (n_recorded == EVICT_FILE_MAX_SCORES)
      return obc_fail(OBC_EINVAL, "--score %s: at most %d scores from files", shown,
                      EVICT_FILE_MAX_SCORES);
    recorded[n_recorded++] = s;
  }
  snprintf(name_out, size, "%s", s.name);
  return OBC_OK;
}

bool evict_score_file_known(const char *name) { return find(name) != NULL; }

const char *evict_score_file_path(const char *name) {
  const FileScore *s = find(name);
  return s ? s->path : NULL;
}

const char *evict_score_file_dataset(const char *name) {
  const FileScore *s = find(name);
  return s ? s->dataset : NULL;
}

int evict_file_scores(TraceReader *reader, const EvictPolicy *p, size_t n, double *scores,
                      size_t *window) {
  const TraceMeta *meta = trace_meta(reader);
  const FileScore *s = find(p->score);
  if (!s) return obc_fail(OBC_EINVAL, "--score %s: no file recorded for this name", p->score);
  ScoresReadRequest request = {.path = s->path,
                               .dataset = s->dataset,
                               .trace_hash = meta->content_hash,
                               .n_layers = meta->model.n_layers,
                               .n_kv_heads = meta->model.n_kv_heads,
                               .n_positions = n};
  *window = 0;
  int rc = scores_read(&request, scores);
  if (rc) obc_fail_context(rc, "--score %s", p->score);
  return rc;
}
