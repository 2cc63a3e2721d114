/* replay.json and replay_steps.csv of a model replay (replay/replay_report.h). */
#include "replay/replay_report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_json.h"
#include "replay/offline.h"

static int write_steps_csv(ObcOutputSet *set, const Replayer *replayer, const ReplayAnswer *r) {
  FILE *fp = NULL;
  int rc = obc_output_open(set, "replay_steps.csv", &fp);
  if (rc) return rc;
  fprintf(fp, "step,token_full,token_replay,kl_forced\n");
  for (size_t t = 0; t < r->n_steps; t++)
    fprintf(fp, "%zu,%d,%d,%.9g\n", t + 1, (int)replay_model_full_token(replayer, t + 1),
            (int)r->tokens[t], r->kl_forced[t]);
  return obc_output_close(set, fp);
}

static int write_json(ObcOutputSet *set, const char *trace_path, const char *model_path,
                      const EvictKeepSet *keep, const Replayer *replayer, const ReplayAnswer *r,
                      const char *command_line) {
  int full_found = -1;
  const char *full_answer = replay_model_full_answer(replayer, &full_found);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "tool_version", OBC_VERSION);
  cJSON_AddStringToObject(root, "command_line", command_line ? command_line : "");
  cJSON_AddStringToObject(root, "trace", trace_path);
  cJSON_AddStringToObject(root, "model", model_path);
  cJSON_AddItemToObject(root, "policy", replay_policy_json(keep));
  cJSON_AddNumberToObject(root, "steps", (double)r->n_steps);
  cJSON_AddStringToObject(root, "answer_full", full_answer);
  cJSON_AddStringToObject(root, "answer", r->answer);
  cJSON_AddNumberToObject(root, "needle_found_full", full_found);
  cJSON_AddNumberToObject(root, "needle_found", r->needle_found);
  cJSON_AddNumberToObject(root, "needle_chars", (double)r->needle_chars);
  cJSON_AddNumberToObject(root, "needle_prefix", (double)r->needle_prefix);
  cJSON_AddItemToObject(
      root, "needle_tokens",
      isfinite(r->needle_tokens) ? cJSON_CreateNumber(r->needle_tokens) : cJSON_CreateNull());
  cJSON_AddNumberToObject(root, "token_agreement", r->agreement);
  cJSON_AddNumberToObject(root, "first_divergence", (double)r->first_divergence);
  cJSON_AddNumberToObject(root, "kl_forced_mean", r->kl_forced_mean);
  cJSON *steps = cJSON_AddArrayToObject(root, "kl_forced_steps");
  for (size_t t = 0; t < r->n_steps; t++)
    cJSON_AddItemToArray(steps, cJSON_CreateNumber(r->kl_forced[t]));
  cJSON_AddNumberToObject(root, "logits_rel_diff_forced", r->logits_rel_diff);
  cJSON_AddNumberToObject(root, "rerun_tokens", (double)r->rerun_tokens);
  cJSON_AddNumberToObject(root, "first_token", (double)r->first_token);
  cJSON_AddNumberToObject(root, "first_token_full", (double)replay_model_full_token(replayer, 0));
  cJSON_AddItemToObject(
      root, "kl_prefill",
      isfinite(r->kl_prefill) ? cJSON_CreateNumber(r->kl_prefill) : cJSON_CreateNull());
  return obc_output_json(set, "replay.json", root);
}

/* replay_logits.f32 when the replayer kept its logits (--save-logits). */
static int write_logits(ObcOutputSet *set, const Replayer *replayer) {
  size_t rows = 0, vocab = 0;
  const float *logits = replay_model_logits(replayer, &rows, &vocab);
  if (!logits || rows == 0) return OBC_OK;
  FILE *fp = NULL;
  int rc = obc_output_open(set, "replay_logits.f32", &fp);
  if (rc) return rc;
  fwrite(logits, sizeof *logits, rows * vocab, fp); /* obc_output_close checks the stream */
  return obc_output_close(set, fp);
}

int replay_write(const char *dir, const char *trace_path, const char *model_path,
                 const EvictKeepSet *keep, const Replayer *replayer, const ReplayAnswer *r,
                 const char *command_line) {
  ObcOutputSet set;
  int rc = obc_output_begin(&set, dir);
  if (!rc) rc = write_steps_csv(&set, replayer, r);
  if (!rc) rc = write_logits(&set, replayer);
  if (!rc) rc = write_json(&set, trace_path, model_path, keep, replayer, r, command_line);
  return obc_output_end(&set, rc);
}
