/* Offline replay (docs/SCIENCE.md, "Eviction and replay"): what a kept set does
 * to the captured decode steps, from the trace alone. For every captured decode
 * row and query head, the attention output over the kept prompt positions plus
 * every generated token's key is the exact set-eviction output
 * (docs/SCIENCE.md, "Eviction and replay"; oracle_set_eviction_output),
 * compared with the captured full-cache output: relative output error
 * ||o' - o|| / ||o||, attention mass lost, and the share of the needle span
 * kept. Offline replay cannot recompute anything: the decode queries (and,
 * under the agnostic protocol, the question's K/V) are the captured ones,
 * computed with the whole context, so under agnostic it shows the loss of
 * the kept set alone, not the re-run question's (docs/SCIENCE.md, "Query
 * protocols"; model replay shows that). */
#ifndef OBC_REPLAY_OFFLINE_H
#define OBC_REPLAY_OFFLINE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "evict/policy.h"
#include "traces/trace.h"

typedef struct {
  size_t n_layers, n_heads, n_kv_heads; /* n_heads: query heads per layer */
  size_t n_steps;                       /* captured decode rows */
  double *rel_error;                    /* (n_layers, n_heads, n_steps) ||o' - o|| / ||o|| */
  double *mass_lost;                    /* (n_layers, n_heads, n_steps) evicted attention mass */
  double *sq_error; /* (n_layers, n_kv_heads, n_steps) sum over the group of ||o' - o||^2 */
  bool has_needle;
  double *needle_kept; /* (n_layers, n_kv_heads) share of the needle span kept */
} ReplayOfflineResult;

/* Overall means (over layers, heads and steps; needle over KV heads). */
typedef struct {
  double rel_error, rel_error_step1, mass_lost, needle_kept;
} ReplayOfflineSummary;

/* Fails with OBC_EINVAL when the trace has no decode rows. */
int replay_offline_run(TraceReader *reader, const EvictKeepSet *keep, ReplayOfflineResult *out);
/* The same results for n kept sets at once (outs: n), from one read of the
 * trace: every (layer, KV head) and its decode rows' logits and
 * probabilities are computed once and shared (docs/SCIENCE.md, "Offline
 * replay of many sets"). Equal to replay_offline_run up to double rounding;
 * the same numbers for any thread count. On failure every outs[k] is freed. */
int replay_offline_run_many(TraceReader *reader, const EvictKeepSet *keeps, size_t n,
                            ReplayOfflineResult *outs);
/* The same with at most max_rows decode rows (query heads x steps) of a
 * (layer, KV head) held at once (0: as many as 96 MiB of logits and
 * weights allow; the tests use small blocks to cross head boundaries). */
int replay_offline_run_many_rows(TraceReader *reader, const EvictKeepSet *keeps, size_t n,
                                 size_t max_rows, ReplayOfflineResult *outs);
/* Allocates a result's arrays for the trace's shape and T decode steps
 * (sq_error zeroed); OBC_ENOMEM after obc_fail when one fails. */
int replay_offline_result_alloc(ReplayOfflineResult *out, const TraceMeta *meta, size_t T);
/* Sets out->has_needle and the share of the needle span's prompt positions
 * that keep (the prompt marks of (layer l, KV head g)) keeps, NaN without a
 * needle span: the one place both replay paths count it. */
void replay_offline_needle(ReplayOfflineResult *out, const TraceMeta *meta,
                           const unsigned char *keep, size_t l, size_t g);
/* Records one replayed output o_new (d) against the trace's o for (layer l,
 * KV head g, query head, decode step t) and its evicted mass: the one place
 * both replay paths (replay_offline_run, replay_offline_run_many) compute
 * rel_error, mass_lost and sq_error. */
void replay_offline_record(ReplayOfflineResult *out, size_t l, size_t g, size_t head, size_t t,
                           const double *o_new, const double *o, size_t d, double lost);
void replay_offline_result_free(ReplayOfflineResult *result);
void replay_offline_summarise(const ReplayOfflineResult *result, ReplayOfflineSummary *summary);

/* DIR/offline_heads.csv (layer,head,kv_head,rel_error,rel_error_step1,
 * mass_lost,needle_kept), offline_layers.csv (layer means), offline_steps.csv
 * (step means) and offline.json (trace, policy, overall means): all of
 * them, or on failure none (an output set, common/obc_file.h). */
int replay_offline_write(const char *dir, const char *trace_path, const EvictKeepSet *keep,
                         const ReplayOfflineResult *result, const char *command_line);

/* The policy of a keep set as a JSON object (for every report of evict/). */
cJSON *replay_policy_json(const EvictKeepSet *keep);

#endif
