/* The option table of the policy options common to evict and replay
 * (common/obc_options.h): each fails with a message naming it and the
 * accepted values. */
#include "evict/policy_args.h"

#include <string.h>

#include "common/obc_error.h"
#include "common/obc_parse.h"
#include "evict/score_file.h"

/* Adapters from the evict_policy_set_* setters to ObcOptionParse. */
static int parse_score(void *p, const char *o, const char *v) {
  (void)o;
  return evict_policy_set_score(p, v);
}
static int parse_steps(void *p, const char *o, const char *v) {
  (void)o;
  return evict_policy_set_steps(p, v);
}
static int parse_budget(void *p, const char *o, const char *v) {
  (void)o;
  return evict_policy_set_budget(p, v);
}
static int parse_budget_rule(void *p, const char *o, const char *v) {
  (void)o;
  return evict_policy_set_budget_rule(p, v);
}
static void show_budget_rule(const void *p, char *text, size_t size) {
  snprintf(text, size, "%s", evict_budget_rule_name(((const EvictPolicy *)p)->budget_rule));
}
static int parse_alloc(void *p, const char *o, const char *v) {
  (void)o;
  return evict_policy_set_allocation(p, v);
}
/* --protocol P or, where the command takes a list (replay --sweep), P,P..:
 * the first sets the policy's protocol, all go to the list. */
static int parse_protocol(void *target, const char *option, const char *value) {
  EvictPolicyProtocolTarget *t = target;
  char buf[256], *items[EVICT_N_PROTOCOLS + 1];
  size_t n = 0;
  int rc = obc_split_list(option, value, buf, sizeof buf, items, EVICT_N_PROTOCOLS + 1, &n);
  if (!rc && n > 1 && !t->list)
    rc = obc_fail(OBC_EINVAL, "%s %s: one protocol expected (a list only in replay --sweep)",
                  option, value);
  if (!rc && n > EVICT_N_PROTOCOLS)
    rc = obc_fail(OBC_EINVAL, "%s %s: at most %d protocols", option, value, EVICT_N_PROTOCOLS);
  if (t->list) t->list->n = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    if ((rc = evict_policy_set_protocol(t->policy, items[i]))) break;
    if (t->list) t->list->protocols[t->list->n++] = t->policy->protocol;
  }
  if (!rc && t->list) t->policy->protocol = t->list->protocols[0];
  return rc;
}
/* The policy's defaults as the help shows them. */
static void show_score(const void *p, char *text, size_t size) {
  snprintf(text, size, "%s", ((const EvictPolicy *)p)->score);
}
static void show_budget(const void *p, char *text, size_t size) {
  snprintf(text, size, "%s", ((const EvictPolicy *)p)->budget_text);
}
static void show_protocol(const void *target, char *text, size_t size) {
  const EvictPolicyProtocolTarget *t = target;
  snprintf(text, size, "%s", evict_protocol_name(t->policy->protocol));
}

static int parse_protect(void *p, const char *o, const char *v) {
  (void)o;
  return evict_policy_set_protect(p, v);
}

static int parse_window(void *target, const char *option, const char *value) {
  int rc = obc_parse_size(option, value, target);
  if (!rc && *(size_t *)target == 0) rc = obc_fail(OBC_EINVAL, "--window 0 (expected >= 1)");
  return rc;
}

static int parse_floor(void *target, const char *option, const char *value) {
  int rc = obc_parse_double(option, value, target);
  double floor = *(double *)target;
  if (!rc && !(floor >= 0.0 && floor <= 1.0))
    rc = obc_fail(OBC_EINVAL, "--adakv-floor %s (expected 0..1)", value);
  return rc;
}

void evict_policy_options(EvictPolicy *p, bool *sinks_given, bool *recent_given,
                          EvictPolicyProtocolTarget *protocol,
                          ObcOption options[EVICT_POLICY_N_OPTIONS]) {
  static char score_help[2048]; /* the table's names (evict/source.h) */
  evict_policy_score_help(score_help, sizeof score_help);
  protocol->policy = p;
  const ObcOption table[] = {
      OBC_OPTION_HEADING("policy options:"),
      OBC_OPT_CUSTOM("--score", "S", p, parse_score, score_help, .show = show_score),
      OBC_OPT_CUSTOM(
          "--oracle", "1|T|N|a-b", p, parse_steps,
          "decode steps of oracle and decode_attn (steps, not answer tokens: the prefill gives the "
          "first answer token, step t feeds answer token t): 1 (the paper's oracle@1, default for "
          "oracle), T "
          "(every captured step, default for decode_attn), N (step N alone) or a-b (steps a..b, "
          "1-based, inclusive)"),
      OBC_OPT_CUSTOM(
          "--budget", "B", p, parse_budget,
          "kept positions per KV head: tokens (40), a fraction (0.1) or a percentage (10%) of the "
          "candidates",
          .show = show_budget),
      OBC_OPT_CUSTOM(
          "--budget-rule", "R", p, parse_budget_rule,
          "how a fractional budget B of n candidates becomes a count, for every score, preset "
          "and the oracle: floor (floor(n x B), B an exact decimal) or kvpress (kvpress's "
          "int(n * (1 - cr)) in double, cr the double nearest 1 - B, and its dependent counts)",
          .show = show_budget_rule),
      OBC_OPT_CUSTOM("--window", "W", &p->window, parse_window, "score window in prompt rows",
                     .default_text = "min(" OBC_OPTION_SPELLED(EVICT_DEFAULT_WINDOW) ", captured)"),
      OBC_OPT_SIZE("--recent", "R", &p->recent, "last R candidates always kept",
                   .default_text = "none", .seen = recent_given),
      OBC_OPT_SIZE("--sinks", "N", &p->sinks, "first N positions always kept",
                   .default_text = "none", .seen = sinks_given),
      OBC_OPT_CUSTOM(
          "--alloc", "A", p, parse_alloc,
          "uniform (default: the budget for every KV head) or adakv (budget x KV heads per layer, "
          "split by score with a floor)"),
      OBC_OPT_CUSTOM("--adakv-floor", "F", &p->adakv_floor, parse_floor,
                     "AdaKV floor per head as a share of the budget",
                     .show = obc_option_show_double),
      OBC_OPT_CUSTOM(
          "--protocol", "P", protocol, parse_protocol,
          "agnostic (as in kvpress: the context is compressed alone, the window ends "
          "where the question span begins; model replay then re-runs the question and the "
          "template tail through the model against the compressed cache, at their own positions), "
          "aware (context and question compressed together as kvpress does: the window ends at "
          "the question's last token, and the template tail and answer prefix after it are kept, "
          "not counted in the budget, and re-run the same way) or "
          "agnostic-captured (agnostic's kept set, replayed with the question's K/V as captured "
          "with the full context, which leaks the evicted tokens). replay --sweep takes a list "
          "(agnostic,aware)",
          .show = show_protocol),
      OBC_OPT_CUSTOM("--mode", "P", protocol, parse_protocol, NULL, .renamed = "--protocol"),
      OBC_OPT_CUSTOM(
          "--protect", "SPAN,..", p, parse_protect,
          "trace spans kept in every KV head (obcache info TRACE lists them: needle, "
          "needle_value, context, question, answer_prefix); they count inside the budget, beside "
          "--sinks and --recent"),
      OBC_OPT_UINT64("--seed", "N", &p->seed, "seed of --score random"),
  };
  _Static_assert(sizeof table / sizeof *table == EVICT_POLICY_N_OPTIONS, "table size");
  memcpy(options, table, sizeof table);
}

void evict_join_names(const char (*names)[32], size_t count, const char *separator, char *out,
                      size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < count && used < size; i++) {
    int n = snprintf(out + used, size - used, "%s%s", i ? separator : "", names[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

int evict_parse_names(const char *option, const char *text, char (*names)[32], size_t *count,
                      size_t max, int (*check)(EvictPolicy *, const char *)) {
  char buf[1024], *items[64];
  size_t n = 0;
  int rc = obc_split_list(option, text, buf, sizeof buf, items, max < 64 ? max : 64, &n);
  *count = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    EvictPolicy probe;
    evict_policy_default(&probe);
    if ((rc = check(&probe, items[i]))) break;
    char name[64]; /* scores under their recorded name (evict_policy_canonical_score) */
    snprintf(name, sizeof name, "%s", check == evict_policy_set_score ? probe.score : items[i]);
    bool spelled_file = check == evict_policy_set_score && evict_score_file_spelled(items[i]);
    if ((strlen(items[i]) >= 32 && !spelled_file) || strlen(name) >= 32)
      return obc_fail(OBC_EINVAL, "%s: at most %zu entries of < 32 characters", option, max);
    snprintf(names[(*count)++], 32, "%s", name);
  }
  return rc;
}
