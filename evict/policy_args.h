/* The policy options shared by `obcache evict` and `obcache replay`
 * (--score, --oracle, --budget, --window, --recent, --sinks, --alloc,
 * --adakv-floor, --mode, --seed), parsed into an EvictPolicy, and a
 * command-line joiner for the provenance attributes of the outputs. */
#ifndef OBC_EVICT_POLICY_ARGS_H
#define OBC_EVICT_POLICY_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "evict/policy.h"

/* The help text of the policy options. */
void evict_policy_print_options(FILE *out);
/* If argv[*i] is a policy option ("--opt value" or "--opt=value"), parses it
 * into policy, advances *i past its value and sets *matched. */
int evict_policy_parse_option(int argc, char **argv, int *i, EvictPolicy *policy, bool *matched);
/* argv joined by spaces into out (size bytes, truncated). */
void evict_join_command_line(int argc, char **argv, char *out, size_t size);

#endif
