/* The policy options shared by `obcache evict` and `obcache replay`
 * (--score, --oracle, --budget, --budget-rule, --window, --recent, --sinks, --alloc,
 * --adakv-floor, --protocol (and its deprecated alias --mode), --protect,
 * --seed) as an option table that fills an
 * EvictPolicy (common/obc_options.h), and a
 * command-line joiner for the provenance attributes of the outputs. */
#ifndef OBC_EVICT_POLICY_ARGS_H
#define OBC_EVICT_POLICY_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "common/obc_options.h"
#include "evict/policy.h"

/* The protocols of --protocol P,P.. (replay --sweep). */
typedef struct {
  EvictProtocol protocols[EVICT_N_PROTOCOLS];
  size_t n; /* 0 = not given */
} EvictProtocolList;

/* Where --protocol goes: policy (set by evict_policy_options) and list, or
 * list NULL where the command takes one protocol only. */
typedef struct {
  EvictPolicy *policy;
  EvictProtocolList *list;
} EvictPolicyProtocolTarget;

enum { EVICT_POLICY_N_OPTIONS = 14 };
/* Fills options with the policy options (a heading and 13 options), parsed
 * into policy; --sinks and --recent also set *sinks_given / *recent_given
 * (either may be NULL); protocol->list (may be NULL) receives a --protocol
 * list. protocol must outlive the parsing. */
void evict_policy_options(EvictPolicy *policy, bool *sinks_given, bool *recent_given,
                          EvictPolicyProtocolTarget *protocol,
                          ObcOption options[EVICT_POLICY_N_OPTIONS]);
/* "a,b,c" into names (at most max < 64 entries of < 32 bytes), each checked
 * by check (evict_policy_set_score, evict_policy_set_budget, ...); scores
 * are stored under their recorded name (evict_policy_canonical_score). */
int evict_parse_names(const char *option, const char *text, char (*names)[32], size_t *count,
                      size_t max, int (*check)(EvictPolicy *, const char *));
/* names (count of them) joined by separator into out (size bytes,
 * truncated): a list evict_parse_names reads, as the help shows a default. */
void evict_join_names(const char (*names)[32], size_t count, const char *separator, char *out,
                      size_t size);

#endif
