/* Scores from a file (evict/score_file.h): the names recorded from
 * NAME=file:PATH[:DATASET] and the row's scores. */
#include "evict/score_file.h"

#include <stdio.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_text.h"
#include "scores/scores_read.h"

typedef ScoresFileSpec FileScore;

/* Recorded while the command line is parsed, read afterwards; a score of
 * eval --score-cmd is re-pointed between samples, never while one is
 * scored. */
static FileScore recorded[EVICT_FILE_MAX_SCORES];
static bool from_command[EVICT_FILE_MAX_SCORES];
static size_t n_recorded;

static FileScore *find(const char *name) {
  for (size_t i = 0; i < n_recorded; i++)
    if (!strcmp(recorded[i].name, name)) return &recorded[i];
  return NULL;
}

bool evict_score_file_spelled(const char *text) { return scores_file_spelled(text); }

int evict_score_file_resolve(const char *text, char *name_out, size_t size) {
  char shown[96];
  obc_text_escape(shown, sizeof shown, text, false);
  if (!evict_score_file_spelled(text)) {
    if (!find(text)) return obc_fail(OBC_EINVAL, "--score %s: no file recorded for it", shown);
    snprintf(name_out, size, "%s", text);
    return OBC_OK;
  }
  FileScore s;
  int rc = scores_file_spec_parse("--score", text, &s);
  if (rc) return rc;
  if (evict_source_find(s.name, strlen(s.name)) || !strcmp(s.name, "file"))
    return obc_fail(OBC_EINVAL,
                    "--score %s: %s is a built-in score's name (obcache evict --list-scores); "
                    "name the file's score otherwise",
                    shown, s.name);
  const FileScore *known = find(s.name);
  if (known && from_command[known - recorded])
    return obc_fail(OBC_EINVAL, "--score %s: %s names a --score-cmd", shown, s.name);
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

int evict_score_file_set(const char *name, const char *path, const char *dataset) {
  char shown[96];
  obc_text_escape(shown, sizeof shown, name, false);
  if (!scores_file_name_valid(name, strlen(name)))
    return obc_fail(OBC_EINVAL, "--score-cmd %s: NAME must have 1..%d of A-Z a-z 0-9 _ . -", shown,
                    SCORES_FILE_NAME_MAX);
  if (evict_source_find(name, strlen(name)) || !strcmp(name, "file"))
    return obc_fail(OBC_EINVAL,
                    "--score-cmd %s: a built-in score's name (obcache evict --list-scores); name "
                    "the command's score otherwise",
                    shown);
  if (strlen(path) >= sizeof recorded[0].path || strlen(dataset) >= sizeof recorded[0].dataset)
    return obc_fail(OBC_EINVAL, "--score-cmd %s: the path of its file is too long", shown);
  FileScore *known = find(name);
  if (known && !from_command[known - recorded])
    return obc_fail(OBC_EINVAL, "--score-cmd %s: already names a score from a file", shown);
  if (!known) {
    if (n_recorded == EVICT_FILE_MAX_SCORES)
      return obc_fail(OBC_EINVAL, "--score-cmd %s: at most %d scores from files and commands",
                      shown, EVICT_FILE_MAX_SCORES);
    from_command[n_recorded] = true;
    known = &recorded[n_recorded++];
    snprintf(known->name, sizeof known->name, "%s", name);
  }
  snprintf(known->path, sizeof known->path, "%s", path);
  snprintf(known->dataset, sizeof known->dataset, "%s", dataset);
  return OBC_OK;
}

void evict_score_file_clear(void) {
  memset(recorded, 0, sizeof recorded);
  memset(from_command, 0, sizeof from_command);
  n_recorded = 0;
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
  if (rc)
    obc_fail_context(rc, "%s %s", from_command[s - recorded] ? "--score-cmd" : "--score", p->score);
  return rc;
}
