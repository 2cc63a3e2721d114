/* Parsing of the policy options common to evict and replay: each option
 * fails with a message naming it and the accepted values. */
#include "evict/policy_args.h"

#include <string.h>

#include "common/obc_cli.h"
#include "common/obc_error.h"

void evict_policy_print_options(FILE *out) {
  fprintf(out,
"policy options:\n"
"  --score S            attn, attn2, vatp, snapkv, obc_v, obc_k, obc_vk, exact_v,\n"
"                       exact_k, exact_vk, remove (analyser scores), random\n"
"                       (seeded), streaming (sinks + most recent), oracle (each\n"
"                       token's true eviction error over the --oracle steps: a\n"
"                       reference, not a bound), decode_attn (attention mass\n"
"                       from the captured decode queries of the --oracle\n"
"                       steps; like oracle, it sees the answer). oracle@1,\n"
"                       oracle@T, oracle@a-b, decode_attn@a-b name the steps\n"
"                       directly. Default obc_vk\n"
"  --oracle 1|T|N|a-b   decode steps of oracle and decode_attn: 1 (the paper's\n"
"                       oracle@1, default for oracle), T (every captured step,\n"
"                       default for decode_attn), N (step N alone) or a-b (steps\n"
"                       a..b, 1-based, inclusive)\n"
"  --budget B           kept positions per KV head: tokens (40), a fraction (0.1)\n"
"                       or a percentage (10%%) of the candidates. Default 10%%\n"
"  --window W           score window in prompt rows (default min(64, captured))\n"
"  --recent R           last R candidates always kept (default 0)\n"
"  --sinks N            first N positions always kept (default 0)\n"
"  --alloc A            uniform (default: the budget for every KV head) or adakv\n"
"                       (budget x KV heads per layer, split by score with a floor)\n"
"  --adakv-floor F      AdaKV floor per head as a share of the budget (default 0.2)\n"
"  --mode M             aware (default: window ends at the question = end of the\n"
"                       prompt) or agnostic (window ends before the question span;\n"
"                       the question is kept on top of the budget)\n"
"  --seed N             seed of --score random (default 1)\n");
}

int evict_policy_parse_option(int argc, char **argv, int *i, EvictPolicy *p, bool *matched) {
  static const char *const names[] = {"--score", "--budget", "--window", "--recent",
                                      "--sinks", "--alloc",  "--adakv-floor", "--mode",
                                      "--seed", "--oracle"};
  const char *arg = argv[*i], *name = NULL;
  *matched = false;
  for (size_t o = 0; !name && o < sizeof names / sizeof *names; o++)
    if (obc_option_matches(arg, names[o])) name = names[o];
  if (!name) return OBC_OK;
  *matched = true;
  const char *v = obc_option_value(argc, argv, i, name);
  if (!v || !v[0]) return obc_fail(OBC_EINVAL, "%s: missing value", name);
  if (!strcmp(name, "--score")) return evict_policy_set_score(p, v);
  if (!strcmp(name, "--budget")) return evict_policy_set_budget(p, v);
  if (!strcmp(name, "--oracle")) return evict_policy_set_steps(p, v);
  if (!strcmp(name, "--window")) {
    int rc = obc_parse_size(name, v, &p->window);
    if (!rc && p->window == 0) rc = obc_fail(OBC_EINVAL, "--window 0 (expected >= 1)");
    return rc;
  }
  if (!strcmp(name, "--recent")) return obc_parse_size(name, v, &p->recent);
  if (!strcmp(name, "--sinks")) return obc_parse_size(name, v, &p->sinks);
  if (!strcmp(name, "--alloc")) return evict_policy_set_allocation(p, v);
  if (!strcmp(name, "--mode")) return evict_policy_set_mode(p, v);
  if (!strcmp(name, "--adakv-floor")) {
    int rc = obc_parse_double(name, v, &p->adakv_floor);
    if (!rc && !(p->adakv_floor >= 0.0 && p->adakv_floor <= 1.0))
      rc = obc_fail(OBC_EINVAL, "--adakv-floor %s (expected 0..1)", v);
    return rc;
  }
  size_t seed = 0;
  int rc = obc_parse_size(name, v, &seed);
  p->seed = seed;
  return rc;
}

void evict_join_command_line(int argc, char **argv, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < argc && used + 1 < size; i++) {
    int n = snprintf(out + used, size - used, "%s%s", i ? " " : "obcache ", argv[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}
