/* The generic score sources of the table (evict/source.h): the analyser
 * quantities over a window of captured prompt rows ending at the last
 * candidate, seeded random scores, recency, and the decode-step
 * references oracle and decode_attn; and how each keeps: per KV head the
 * first --sinks candidates, the last --recent, then the best-scoring
 * others (ties: lower position first), uniformly or with the AdaKV-style
 * allocation of evict/policy.h. */
#ifndef OBC_EVICT_GENERIC_H
#define OBC_EVICT_GENERIC_H

#include "evict/policy.h"

/* The count of EvictSource.count: evict_budget_count, checked to be 1..n
 * with room for the sinks and the recent window. */
int evict_generic_count(const EvictPolicy *policy, size_t n, size_t *k);
/* Recency's: the sinks must leave room for a recent window. */
int evict_recency_count(const EvictPolicy *policy, size_t n, size_t *k);

/* EvictSource.scores of each generic row. */
int evict_quantity_scores(TraceReader *reader, const EvictPolicy *policy, size_t n, double *scores,
                          size_t *window);
int evict_random_scores(TraceReader *reader, const EvictPolicy *policy, size_t n, double *scores,
                        size_t *window);
int evict_recency_scores(TraceReader *reader, const EvictPolicy *policy, size_t n, double *scores,
                         size_t *window);
int evict_oracle_scores(TraceReader *reader, const EvictPolicy *policy, size_t n, double *scores,
                        size_t *window);
int evict_decode_attn_scores(TraceReader *reader, const EvictPolicy *policy, size_t n,
                             double *scores, size_t *window);

/* EvictSource.keep of the scored generic rows, and of recency (its
 * recent window is the rest of the budget after the sinks). */
int evict_generic_keep(const EvictPolicy *policy, const double *scores, size_t n_layers,
                       size_t n_kv_heads, size_t n_prompt, size_t n, const unsigned char *protect,
                       EvictKeepSet *out);
int evict_recency_keep(const EvictPolicy *policy, const double *scores, size_t n_layers,
                       size_t n_kv_heads, size_t n_prompt, size_t n, const unsigned char *protect,
                       EvictKeepSet *out);

#endif
