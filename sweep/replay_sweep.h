/* Budget sweep of eviction policies (`obcache replay --sweep`): scores x
 * budgets on one trace or on every trace (*.h5) of a sweep folder. Each
 * score is computed once per trace and serves every budget; each (score,
 * budget) is replayed offline and, unless disabled, with the model. Writes
 * DIR/replay_cells.csv (one row per trace, score and budget),
 * DIR/replay_sweep.csv (means over traces: the data of the replay figures of
 * `obcache plot`), DIR/kl_steps.csv (teacher-forced KL per score, budget and
 * decode step, mean over traces) and DIR/replay_sweep.json, and prints the
 * tables. Scores are named as in outputs (oracle@1, oracle@T, decode_attn).
 * With several protocols every score runs under each, and the rows are
 * named score:protocol (every file also has a last column protocol). When
 * the scores hold pairs X and X+obc_* (sweep/replay_pairs.h), the paired
 * table "baseline vs baseline + OBCache" is printed and written to
 * DIR/replay_pairs.csv. */
#ifndef OBC_EVICT_SWEEP_H
#define OBC_EVICT_SWEEP_H

#include <stdbool.h>
#include <stddef.h>

#include "evict/policy.h"
#include "model/model.h"

#define EVICT_SWEEP_MAX 64
#define EVICT_SWEEP_MAX_TRACES 256

typedef struct {
  char scores[EVICT_SWEEP_MAX][32];
  size_t n_scores;
  char budgets[EVICT_SWEEP_MAX][32];
  size_t n_budgets;
  EvictPolicy base; /* window, recent, sinks, allocation, protocol, protect, seed */
  /* Protocols swept (each score x budget under each); 0 = base.protocol. */
  EvictProtocol protocols[EVICT_N_PROTOCOLS];
  size_t n_protocols;
  bool with_model;          /* model replay as well as offline */
  const char *model_path;   /* NULL = the default model */
  ModelWeightsMode weights; /* how model_load holds the matrices */
  size_t steps;             /* decode steps of the model replay (0 = all captured) */
  size_t threads;
  const char *device; /* runtime backend of the model replay: NULL/"cpu", "cuda", "cuda-bf16" */
  /* Model-replay sequences decoded together (replay_model_run_batch; each
   * kept set is two, free-running and teacher-forced): 0 = as many as
   * memory allows, 1 = one set after another (replay_model_run). */
  size_t batch;
  /* Kept sets replayed offline together (replay_offline_run_many): 0 = all of
   * a trace, 1 = one after another (replay_offline_run, the reference). */
  size_t offline_batch;
  /* A folder for every kept set as a keep file (obcache evict's format),
   * named TRACE.SCORE.BUDGET.PROTOCOL.h5; NULL = none. */
  const char *keep_out;
} SweepReplayConfig;

/* Default scores (attn attn_maxpool attn_vl1 obc_v obc_k obc_vk recency
 * random oracle@1 oracle@T decode_attn) and budgets (1% 2% 5% 10% 20% 40%), with
 * the model. */
void sweep_replay_config_default(SweepReplayConfig *config);
/* input: a trace file or a folder of traces. */
int sweep_replay_run(const char *input, const char *out_dir, const SweepReplayConfig *config,
                     const char *command_line);

#endif
