/* Files of a model replay: replay.json (trace, model, policy, answers, needle
 * match and prefix, token agreement, first diverging step, teacher-forced KL
 * per step and its mean; under agnostic the re-run's tokens, first answer
 * token and its KL) and replay_steps.csv (step, full-cache token, replayed
 * token, teacher-forced KL), and replay_logits.f32 when the replayer kept
 * its logits (replay_model_keep_logits), each written under a temporary
 * name. */
#ifndef OBC_REPLAY_REPLAY_REPORT_H
#define OBC_REPLAY_REPLAY_REPORT_H

#include "replay/model_replay.h"
#include "evict/policy.h"

int replay_write(const char *dir, const char *trace_path, const char *model_path,
                 const EvictKeepSet *keep, const Replayer *replayer, const ReplayAnswer *result,
                 const char *command_line);

#endif
