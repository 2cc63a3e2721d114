/* Model replay (docs/SCIENCE.md, "Eviction and replay"): the trace's prompt K/V
 * loaded as the model's cache (no prefill recomputation), the evicted rows
 * dropped per (layer, KV head) through runtime_set_kept, then T decode steps
 * from the first generated token g0 at position s:
 *
 * - free-running: greedy, each step fed the previous step's argmax; the
 *   answer is checked for the needle's value (RULER string match, ignoring
 *   case; also the longest prefix of the value it holds and the share of the
 *   value's tokens it reproduces) and compared token by token with the
 *   full-cache answer (share of matching tokens, first diverging step). No KL
 *   here: once the tokens differ the two runs condition on different text;
 * - teacher-forced: each step fed the full-cache token, so that the KL
 *   divergence KL(full || evicted) of each step's next-token distribution
 *   compares like with like.
 *
 * Under the agnostic protocol (evict/policy.h) the question and the template
 * tail, the prompt positions from the kept set's n_candidates on, are first
 * re-run through the model against the compressed cache at their own
 * positions (token p keeps position id p), so that their K/V and the logits
 * of the first answer token are recomputed without the evicted context; the
 * free-running answer starts from that first token, the teacher-forced run
 * from the full cache's g0. The first token's distribution is compared with
 * the same re-run over the full cache (kl_prefill). Aware and
 * agnostic-captured replays use the captured K/V of the whole prompt.
 *
 * A replayer loads the trace once and replays any number of kept sets. The
 * model must match the trace (layers, heads, KV heads, head dim, vocabulary)
 * and reproduce its first decode step's logits with the full cache, which
 * also catches another RoPE layout or other weights. */
#ifndef OBC_REPLAY_MODEL_REPLAY_H
#define OBC_REPLAY_MODEL_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "evict/policy.h"
#include "model/model.h"
#include "traces/trace.h"

#define REPLAY_MAX_STEPS 1024

typedef struct {
  size_t n_steps;
  int32_t tokens[REPLAY_MAX_STEPS]; /* free-running predictions of steps 0..n_steps-1 */
  char answer[4096];                /* g0 + the predictions up to a stop token, decoded */
  int needle_found;                 /* 1 / 0; -1 without a needle_value span or tokenizer */
  size_t needle_chars;              /* characters of the needle's value; 0 without one */
  size_t needle_prefix;             /* longest prefix of the value in the answer (characters) */
  double needle_tokens;    /* share of the value's tokens reproduced in order; NaN without */
  double agreement;        /* share of steps whose prediction equals the full cache's */
  size_t first_divergence; /* first step (1-based) predicting another token; 0 = none */
  double kl_forced[REPLAY_MAX_STEPS]; /* KL(full || evicted) per step, teacher-forced */
  double kl_forced_mean;
  double logits_rel_diff; /* teacher-forced max |l' - l| / max |l| over all steps */
  /* Free-running: top-1 minus top-2 logit of each step (how close its argmax
   * was to another token), and max |logit| over every replayed step. */
  double margin[REPLAY_MAX_STEPS];
  double logit_scale;
  int32_t first_token;  /* first answer token: the re-run's argmax, else the captured g0 */
  double first_margin;  /* its top-1 minus top-2 logit under a re-run; NaN without one */
  size_t rerun_tokens;  /* prompt positions re-run (agnostic); 0 = none */
  double kl_prefill;    /* KL(full || evicted) of the first answer token; NaN unless re-run */
  double rerun_seconds; /* wall time of the re-run */
} ReplayAnswer;

typedef struct Replayer Replayer;

/* steps: decode steps to replay, 0 = every captured one (the trace's logits
 * rows). threads: 0 = default. device: the runtime backend ("cpu", NULL = cpu,
 * "cuda", "cuda-bf16"); batched replay (replay_model_run_batch) runs on the
 * CPU only, so on a GPU the kept sets are replayed one after another there. */
int replay_model_open(const Model *model, TraceReader *reader, size_t steps, size_t threads,
                      const char *device, Replayer **out);
void replay_model_close(Replayer *replayer);
/* The full-cache answer (the trace's tokens) and whether it has the needle. */
const char *replay_model_full_answer(const Replayer *replayer, int *needle_found);
/* The full cache's token of decode step t (1-based; 0 is g0). */
int32_t replay_model_full_token(const Replayer *replayer, size_t t);
/* With on, replay_model_run keeps the logits it computes for
 * replay_model_logits. */
int replay_model_keep_logits(Replayer *replayer, bool on);
/* The last replay_model_run's logits, float32 (*rows, vocab): under a
 * re-run first the first answer token's (the re-run's last position), then
 * every teacher-forced step's; NULL unless kept. */
const float *replay_model_logits(const Replayer *replayer, size_t *rows, size_t *vocab);
/* With on, replays run free-running only, for callers that need only the
 * answers: no teacher-forced run (kl_forced, kl_forced_mean and
 * logits_rel_diff are NaN), and each answer ends at its first stop token
 * (out->n_steps counts the steps decoded, the stop token's included; 0 when
 * the first answer token is one; agreement and first_divergence over those
 * steps). Refused while logits are kept. */
int replay_model_free_running_only(Replayer *replayer, bool on);
/* Replays one kept set, one sequence at a time (runtime_forward). */
int replay_model_run(Replayer *replayer, const EvictKeepSet *keep, ReplayAnswer *out);
/* Replays n kept sets together (runtime/batch.h): the free-running and the
 * teacher-forced sequence of every set, at most max_seqs sequences per pass
 * (0 = as many as REPLAY_BATCH_BYTES of batch state allow; at least 2,
 * one set). Sets that re-run what follows their candidates (the question
 * under agnostic, the template's tail under aware) share the prompt up to
 * their candidates' end and re-run the rest in the batch, each sequence over
 * its own marks, one token per call, before decoding. On a GPU the sets are
 * replayed one after another (replay_model_run). outs[i] equals
 * replay_model_run of keeps[i] up to rounding (docs/SCIENCE.md, "Batched
 * replay"). */
int replay_model_run_batch(Replayer *replayer, const EvictKeepSet *keeps, size_t n, size_t max_seqs,
                           ReplayAnswer *outs);
/* Sequences per pass of replay_model_run_batch for max_seqs (0 = by memory). */
size_t replay_model_batch_seqs(const Replayer *replayer, size_t max_seqs);

/* Memory for the batch state of one pass of replay_model_run_batch. */
#define REPLAY_BATCH_BYTES ((size_t)1 << 30)

#endif
