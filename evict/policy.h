/* Eviction policies (docs/SCIENCE.md, "Eviction and replay"): which prompt
 * positions each (layer, KV head) keeps after prefill. A policy is a score (any
 * analyser score, the oracle over a range of decode steps as a reference (not a
 * bound: docs/SCIENCE.md), the decode queries' attention decode_attn, seeded
 * random, or streaming = sinks + most recent) x a budget (tokens or a fraction
 * of the candidates) x a recent window x sink tokens x an allocation across KV
 * heads x a query protocol (kvpress's meanings, docs/SCIENCE.md, "Query
 * protocols"):
 *
 * - agnostic (the default, as in kvpress): the context is compressed alone.
 *   Scores come from the window of prompt rows ending where the trace's
 *   "question" span begins; candidates are the positions before it. Model
 *   replay then re-runs the question and the template tail (every prompt
 *   position from the question's begin on) through the model against the
 *   compressed cache, at their own positions, and decodes from there.
 * - aware: context and question are compressed together (kvpress's
 *   query-aware compression): the window ends at the question span's last
 *   token and candidates are the positions up to it; the template tail and
 *   answer prefix after it are kept on top of the budget and, in model
 *   replay, re-run against the compressed cache as agnostic's tail is.
 * - agnostic-captured: agnostic's kept set, but model replay keeps the
 *   question's K/V as captured (computed while attending to the whole
 *   context, so they carry information from evicted tokens). A variant for
 *   comparison with earlier measurements.
 *
 * Under both agnostic protocols the positions from the question's begin on
 * are kept on top of the budget; a trace without a "question" span has no
 * tail, and every protocol compresses its whole prompt.
 *
 * Protected spans (--protect question,needle): the positions of the named
 * trace spans are kept in every KV head and count inside the budget (as
 * kvpress counts its protected window), beside the sinks and the recent
 * window; protected positions after the candidates are kept anyway.
 *
 * Selection per KV head: the first `sinks` candidates, the last `recent`
 * candidates, then the best-scoring others (ties: lower position first).
 * Uniform allocation gives every KV head the budget; AdaKV-style allocation
 * gives each layer budget x n_kv_heads, every head a floor of
 * max(sinks + recent, ceil(floor_share x budget)) selected as above, and the
 * rest of the layer's budget to the best remaining (score, head, position)
 * across the layer's heads, so heads with more high scores get more. */
#ifndef OBC_EVICT_POLICY_H
#define OBC_EVICT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "evict/source.h"
#include "oracle/oracle_steps.h"
#include "traces/trace.h"

typedef enum {
  EVICT_PROTOCOL_AGNOSTIC = 0,     /* context compressed alone, question re-run */
  EVICT_PROTOCOL_AWARE,            /* context + question compressed together */
  EVICT_PROTOCOL_AGNOSTIC_CAPTURED /* agnostic's kept set, question K/V as captured */
} EvictProtocol;
#define EVICT_N_PROTOCOLS 3
#define EVICT_DEFAULT_PROTOCOL EVICT_PROTOCOL_AGNOSTIC
#define EVICT_MAX_PROTECT 8 /* spans of --protect */
/* Where protected positions count, as outputs record it (protect_budget). */
#define EVICT_PROTECT_BUDGET "inside"

/* How a fractional budget B of n candidates becomes a count k
 * (evict_budget_count; docs/SCIENCE.md, "Budget rounding"):
 * - floor (the default): k = floor(n x B), B read as an exact decimal.
 * - kvpress: k = int(n * (1 - cr)) in IEEE double, as kvpress's presses
 *   compute it, with cr = compression_ratio the double nearest 1 - B
 *   (evict_budget_compression_ratio), as a user writes 0.9 for 10%. */
typedef enum { EVICT_BUDGET_RULE_FLOOR = 0, EVICT_BUDGET_RULE_KVPRESS } EvictBudgetRule;
#define EVICT_N_BUDGET_RULES 2

#define EVICT_DEFAULT_WINDOW 64
#define EVICT_DEFAULT_ADAKV_FLOOR 0.2

typedef struct EvictPolicy {
  char score[32];              /* "obc_vk", "random", "oracle@T", ... (canonical once applied) */
  const EvictSource *source;   /* its row of the table (evict/source.h); NULL when read back */
  int inner;                   /* a paired method's: EvictPresetInner */
  char budget_text[32];        /* as given: "40", "0.1", "10%" */
  EvictBudgetRule budget_rule; /* how a fraction becomes a count */
  size_t window;               /* rows of the score window; 0 = min(64, captured) */
  size_t recent;
  size_t sinks;
  EvictAllocation allocation;
  double adakv_floor; /* AdaKV per-head floor as a share of the budget */
  EvictProtocol protocol;
  char protect[EVICT_MAX_PROTECT][64]; /* --protect: names of trace spans kept */
  size_t n_protect;
  uint64_t seed;     /* random scores */
  OracleSteps steps; /* decode steps of oracle / decode_attn, when steps_given */
  bool steps_given;  /* else oracle@1 for oracle, every step (T) for decode_attn */
  const char *model; /* --model of a preset that reads the model's weights; NULL = the default */
} EvictPolicy;

/* The kept prompt positions of every (layer, KV head). */
typedef struct EvictKeepSet {
  size_t n_layers, n_kv_heads, n_prompt;
  size_t n_candidates; /* positions [0, n_candidates) compete; the rest are always kept */
  size_t budget;       /* kept candidates per KV head (AdaKV: the mean) */
  size_t window;       /* the score window used (0 for random / streaming / oracle) */
  unsigned char *keep; /* (n_layers, n_kv_heads, n_prompt) 1 = kept */
  size_t *n_kept;      /* (n_layers, n_kv_heads) kept candidates */
  EvictPolicy policy;
  char trace_hash[17]; /* content hash of the trace it was made for; "" unknown */
} EvictKeepSet;

void evict_policy_default(EvictPolicy *policy);
/* Sets the score from its name: a row of the table (evict/source.h),
 * oracle and decode_attn also with their steps (oracle@T, decode_attn@3-9),
 * a method that pairs also with +obc_v|obc_k|obc_vk inside (or +attn, the
 * swap); OBC_EINVAL naming the valid ones otherwise. The old spelling
 * preset:NAME is taken as NAME with a one-line note on stderr; vatp,
 * snapkv and streaming name the methods (the generic quantities are
 * attn_vl1 and attn_maxpool, the generic sinks + recent window recency). */
int evict_policy_set_score(EvictPolicy *policy, const char *name);
/* The name a score is recorded and paired under: the name without the
 * preset: prefix that result folders of earlier versions carry. */
void evict_policy_canonical_score(const char *name, char *out, size_t size);
/* The help text of --score: every row of the table by kind. */
void evict_policy_score_help(char *out, size_t size);
/* --oracle 1|T|N|a-b: the steps of oracle and decode_attn. */
int evict_policy_set_steps(EvictPolicy *policy, const char *text);
/* The decode steps the score sums over (oracle / decode_attn). */
OracleSteps evict_policy_steps(const EvictPolicy *policy);
/* The score's name in outputs: "oracle@1", "oracle@T", "oracle@a-b",
 * "decode_attn" (every step) or "decode_attn@a-b"; else the name as given. */
void evict_policy_score_name(const EvictPolicy *policy, char *out, size_t size);
/* "40" (tokens), "0.1" or "10%" (fraction of the candidates). */
int evict_policy_set_budget(EvictPolicy *policy, const char *text);
int evict_policy_set_allocation(EvictPolicy *policy, const char *name);
/* "agnostic", "aware" or "agnostic-captured". */
int evict_policy_set_protocol(EvictPolicy *policy, const char *name);
/* --protect "question,needle": span names (checked against a trace by
 * evict_policy_protected). */
int evict_policy_set_protect(EvictPolicy *policy, const char *list);
const char *evict_allocation_name(EvictAllocation allocation);
const char *evict_protocol_name(EvictProtocol protocol);
/* Whether the protocol re-runs the prompt after its candidates (agnostic:
 * question and template tail; aware: the template tail). */
bool evict_protocol_reruns_tail(EvictProtocol protocol);
/* The protected spans as "question,needle" ("" for none). */
void evict_policy_protect_text(const EvictPolicy *policy, char *out, size_t size);
/* The protected positions: *mask (n_prompt) 1 = protected, malloc'd, or
 * NULL when the policy protects nothing; OBC_EINVAL naming the trace and
 * its spans when a span is unknown. */
int evict_policy_protected(const EvictPolicy *policy, const TraceMeta *meta, const char *trace,
                           unsigned char **mask);

/* "floor" or "kvpress" (--budget-rule). */
int evict_policy_set_budget_rule(EvictPolicy *policy, const char *name);
const char *evict_budget_rule_name(EvictBudgetRule rule);

/* ---- budget counts: the one place a budget becomes a number of tokens ---- */

/* The budget text as an exact ratio num / den: "0.4" = 4/10, "40%" = 40/100,
 * "1e-1" = 1/10; *tokens (num, den 1) when it is a whole number of tokens
 * ("40"). OBC_EINVAL naming the text otherwise. */
int evict_budget_ratio(const char *text, uint64_t *num, uint64_t *den, bool *tokens);
/* kvpress's compression_ratio of a fractional budget num / den: the double
 * nearest 1 - num / den, (double)(den - num) / (double)den (one correctly
 * rounded division of two exact integers, so it equals Python's float of
 * the decimal 1 - B: 0.9 for 10%). */
double evict_budget_compression_ratio(uint64_t num, uint64_t den);
/* The kept count of n candidates under the policy's budget text and rule,
 * unchecked (may be 0 or, for tokens, more than n): tokens keep that many;
 * a fraction floor(n x B) (floor) or (size_t)(n * (1.0 - cr)) (kvpress).
 * Every policy, preset and the oracle count through this function. */
int evict_budget_count(const EvictPolicy *policy, size_t n, size_t *count);
/* A share of the kept count k that a method derives from it, as the
 * method's reference computes it: under the floor rule k / divisor
 * (integer division), under the kvpress rule (size_t)(k * factor) in
 * double (AdaKV's safeguard int(n_kept * 0.2): divisor 5, factor 0.2). */
size_t evict_budget_share(const EvictPolicy *policy, size_t k, size_t divisor, double factor);

/* Budget in tokens for n_candidates: the row's count (evict_budget_count,
 * checked against what the row keeps outright). */
int evict_policy_budget_tokens(const EvictPolicy *policy, size_t n_candidates, size_t *tokens);
/* First position after the candidates under the protocol (n_prompt without
 * a question span; else the question's end when query-aware, its begin
 * otherwise). */
int evict_policy_candidates(const EvictPolicy *policy, const TraceMeta *meta, size_t *n);

/* The policy's scores of every candidate: *scores (planes, n_layers,
 * n_kv_heads, *n_candidates), malloc'd, with one plane except for a
 * two-stage preset (EvictSource.planes: criticalkv-snapkv holds its
 * base score in plane 0 and the projected value norm in plane 1, and
 * evict_keep_from_scores combines them for each budget); *window is the
 * score window used (0 when the score has none). Computed once, they serve
 * every budget. */
int evict_policy_scores(TraceReader *reader, const EvictPolicy *policy, double **scores,
                        size_t *n_candidates, size_t *window);
/* Applies the policy to every (layer, KV head) of the trace. */
int evict_policy_apply(TraceReader *reader, const EvictPolicy *policy, EvictKeepSet *out);
/* Same, and hands the scores it selected from to *scores (n_layers,
 * n_kv_heads, out->n_candidates), malloc'd, when scores is not NULL: for a
 * two-stage preset the budget's final scores (EvictSource.final_scores). */
int evict_policy_apply_scores(TraceReader *reader, const EvictPolicy *policy, EvictKeepSet *out,
                              double **scores);
/* Same, on scores given per head: scores as evict_policy_scores makes them.
 * protect: (n_prompt) protected positions (evict_policy_protected) or NULL. */
int evict_keep_from_scores(const EvictPolicy *policy, const double *scores, size_t n_layers,
                           size_t n_kv_heads, size_t n_prompt, size_t n_candidates,
                           const unsigned char *protect, EvictKeepSet *out);
void evict_keep_set_free(EvictKeepSet *keep);

/* A candidate of an AdaKV-style pool across a layer's KV heads. */
typedef struct {
  double score;
  size_t head, position;
} EvictCandidate;
/* Sets k->n_kept of every KV head of layer from its mask (candidates only). */
void evict_keep_count_layer(EvictKeepSet *k, size_t layer);
/* Keeps the layer's best `rest` candidates not kept yet, across its heads:
 * higher score first (NaN last), then lower head, then lower position.
 * scores (n_kv_heads, n); keep: the layer's mask (n_kv_heads, n_prompt);
 * pool: scratch (n_kv_heads * n). */
void evict_keep_layer_best(const double *scores, size_t n_kv_heads, size_t n, size_t n_prompt,
                           size_t rest, unsigned char *keep, EvictCandidate *pool);
/* Contiguous captured prompt rows ending just before position end. */
size_t evict_rows_ending_at(const TraceMeta *meta, size_t end);

/* The keep file: HDF5 with keep (n_layers, n_kv_heads, n_prompt) uint8,
 * n_kept (n_layers, n_kv_heads) int64, positions (n_layers, n_kv_heads,
 * max kept) int64 padded with -1, and attributes for every policy parameter,
 * the trace, its content hash (keep->trace_hash) and the command line.
 * Schema obcache-keep/2: fixed-length strings, checksummed metadata and
 * Fletcher32 chunks, so that a damaged file is an error (schema 1 is still
 * read). Written under a temporary name. */
int evict_keep_write(const char *path, const EvictKeepSet *keep, const char *trace_path,
                     const char *command_line);
/* Reads a keep file, checks every value and checks it against the trace:
 * refused when it records another content hash than meta's, or another
 * shape; when the mask's counts contradict the budget attribute (uniform:
 * budget in every KV head; adakv: budget x n_kv_heads in every layer) or
 * the mask keeps no candidate; and, schema 2, without trace_hash (always
 * written: "" for a schema-1 trace). When either hash is unknown (a
 * schema-1 trace or keep file) the shape alone is checked and a one-line
 * warning goes to stderr. A file not
 * in the checksummed format, or of schema 1, is read in a child process
 * (evict/keep_legacy.h). */
int evict_keep_read(const char *path, const TraceMeta *meta, EvictKeepSet *out);

#endif
