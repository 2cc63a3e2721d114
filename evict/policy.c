/* Policies: turn per-(layer, KV head) scores into kept prompt positions with
 * sinks, a recent window and a uniform or AdaKV-style budget (evict/policy.h).
 * Scores come from the analyser's window sweep, the oracle, a seeded hash or
 * the position itself (streaming); selection reuses scores/select.h so ties
 * break exactly as in the recall figures. */
#include "evict/policy.h"

#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scores/score_head.h"
#include "scores/scores.h"
#include "scores/select.h"
#include "common/obc_error.h"
#include "common/obc_parse.h"
#include "oracle/decode_attention.h"
#include "evict/preset.h"

void evict_policy_default(EvictPolicy *p) {
  memset(p, 0, sizeof *p);
  snprintf(p->score, sizeof p->score, "obc_vk");
  p->kind = EVICT_SCORE_QUANTITY;
  p->quantity = OBC_Q_OBC_VK;
  snprintf(p->budget_text, sizeof p->budget_text, "10%%");
  p->budget_rule = EVICT_BUDGET_RULE_FLOOR;
  p->adakv_floor = EVICT_DEFAULT_ADAKV_FLOOR;
  p->seed = 1;
}

/* snapkv, vatp and streaming: names of generic scores and of presets. */
static bool names_generic_score(const char *name, size_t n) {
  char base[32];
  if (n >= sizeof base) return false;
  memcpy(base, name, n);
  base[n] = '\0';
  return score_quantity_from_name(base) >= 0 || !strcmp(base, "streaming");
}

void evict_policy_canonical_score(const char *name, char *out, size_t size) {
  const char *plus = strchr(name, '+');
  bool shadowed =
      strncmp(name, "preset:", 7) && plus && names_generic_score(name, (size_t)(plus - name));
  snprintf(out, size, "%s%s", shadowed ? "preset:" : "", name);
}

int evict_policy_set_score(EvictPolicy *p, const char *name) {
  int q = score_quantity_from_name(name), rc = OBC_OK;
  if (q >= 0) {
    p->kind = EVICT_SCORE_QUANTITY;
    p->quantity = q;
  } else if (!strcmp(name, "random")) {
    p->kind = EVICT_SCORE_RANDOM;
  } else if (!strcmp(name, "streaming")) {
    p->kind = EVICT_SCORE_STREAMING;
  } else if (!strcmp(name, "oracle") || !strncmp(name, "oracle@", 7) ||
             !strcmp(name, "decode_attn") || !strncmp(name, "decode_attn@", 12)) {
    p->kind = name[0] == 'o' ? EVICT_SCORE_ORACLE : EVICT_SCORE_DECODE_ATTN;
    const char *at = strchr(name, '@');
    if (at) {
      rc = oracle_steps_parse("--score", at + 1, &p->steps);
      if (rc) return rc;
      p->steps_given = true;
    }
  } else if ((rc = evict_preset_parse(name, &p->preset, &p->preset_inner)) <= 0) {
    if (rc) return rc;
    p->kind = EVICT_SCORE_PRESET;
    evict_policy_canonical_score(name, p->score, sizeof p->score);
    return OBC_OK;
  } else {
    char names[512] = "";
    for (int i = 0; i < OBC_Q_COUNT; i++) {
      strncat(names, score_quantity_name((ScoreQuantity)i), sizeof names - strlen(names) - 1);
      strncat(names, ", ", sizeof names - strlen(names) - 1);
    }
    return obc_fail(OBC_EINVAL,
                    "--score %s: unknown score (expected one of %srandom, streaming, "
                    "oracle[@1|@T|@a-b], decode_attn[@...] or a preset: %s, as NAME or "
                    "preset:NAME, +obc_v|obc_k|obc_vk inside)",
                    name, names, evict_preset_names());
  }
  snprintf(p->score, sizeof p->score, "%s", name);
  return OBC_OK;
}

int evict_policy_set_steps(EvictPolicy *p, const char *text) {
  int rc = oracle_steps_parse("--oracle", text, &p->steps);
  if (!rc) p->steps_given = true;
  return rc;
}

OracleSteps evict_policy_steps(const EvictPolicy *p) {
  if (p->steps_given) return p->steps;
  return p->kind == EVICT_SCORE_DECODE_ATTN ? ORACLE_STEPS_ALL : ORACLE_STEPS_ONE;
}

void evict_policy_score_name(const EvictPolicy *p, char *out, size_t size) {
  OracleSteps steps = evict_policy_steps(p);
  if (p->kind == EVICT_SCORE_ORACLE)
    oracle_steps_name("oracle", &steps, out, size);
  else if (p->kind == EVICT_SCORE_DECODE_ATTN && steps.all)
    snprintf(out, size, "decode_attn");
  else if (p->kind == EVICT_SCORE_DECODE_ATTN)
    oracle_steps_name("decode_attn", &steps, out, size);
  else
    snprintf(out, size, "%s", p->score);
}

int evict_policy_set_budget(EvictPolicy *p, const char *text) {
  size_t n = strlen(text);
  double value = 0.0;
  char *end = NULL;
  if (n == 0 || n >= sizeof p->budget_text)
    return obc_fail(OBC_EINVAL,
                    "--budget '%s': expected tokens (40), a fraction (0.1) or a "
                    "percentage (10%%)",
                    text);
  char number[32]; /* the text without a '%' at its end */
  snprintf(number, sizeof number, "%.*s", (int)(n - (text[n - 1] == '%')), text);
  value = strtod(text, &end);
  bool percent = end && *end == '%' && end[1] == '\0';
  if (!end || end == text || (*end && !percent) || !isfinite(value) || value <= 0.0 ||
      !obc_parse_is_decimal(number))
    return obc_fail(OBC_EINVAL,
                    "--budget '%s': expected a positive number of tokens (40), a "
                    "fraction (0.1) or a percentage (10%%)",
                    text);
  if (percent && value > 100.0)
    return obc_fail(OBC_EINVAL, "--budget %s: more than the whole prompt (expected <= 100%%)",
                    text);
  bool fraction = !percent && (strchr(text, '.') || strchr(text, 'e') || strchr(text, 'E'));
  if (fraction && value > 1.0)
    return obc_fail(OBC_EINVAL, "--budget %s: a fraction must be <= 1 (tokens are integers)", text);
  if (!percent && !fraction && (double)(size_t)value != value)
    return obc_fail(OBC_EINVAL, "--budget %s: expected a whole number of tokens", text);
  uint64_t num = 0, den = 1;
  bool tokens = false;
  int rc = evict_budget_ratio(text, &num, &den, &tokens);
  if (rc) return rc;
  snprintf(p->budget_text, sizeof p->budget_text, "%s", text);
  return OBC_OK;
}

static const char *const budget_rule_names[EVICT_N_BUDGET_RULES] = {
    [EVICT_BUDGET_RULE_FLOOR] = "floor", [EVICT_BUDGET_RULE_KVPRESS] = "kvpress"};

int evict_policy_set_budget_rule(EvictPolicy *p, const char *name) {
  for (int i = 0; i < EVICT_N_BUDGET_RULES; i++)
    if (!strcmp(name, budget_rule_names[i])) {
      p->budget_rule = (EvictBudgetRule)i;
      return OBC_OK;
    }
  return obc_fail(OBC_EINVAL, "--budget-rule %s: expected floor or kvpress", name);
}

const char *evict_budget_rule_name(EvictBudgetRule rule) {
  return (unsigned)rule < EVICT_N_BUDGET_RULES ? budget_rule_names[rule] : "floor";
}

/* ==== Budget counts ==== */

int evict_budget_ratio(const char *text, uint64_t *num, uint64_t *den, bool *tokens) {
  uint64_t n = 0, d = 1;
  const char *c = text;
  bool dot = false, digits = false;
  *tokens = !strchr(text, '.') && !strchr(text, 'e') && !strchr(text, 'E') && !strchr(text, '%');
  for (; *c && (isdigit((unsigned char)*c) || (*c == '.' && !dot)); c++) {
    if (*c == '.') {
      dot = true;
      continue;
    }
    if (n > UINT64_MAX / 100 || (dot && d > UINT64_MAX / 100))
      return obc_fail(OBC_EINVAL, "--budget %s: too many digits for an exact budget", text);
    n = n * 10 + (uint64_t)(*c - '0');
    if (dot) d *= 10;
    digits = true;
  }
  if (*c == 'e' || *c == 'E') {
    char *end = NULL;
    long e = strtol(c + 1, &end, 10);
    if (end == c + 1 || e < -18 || e > 18)
      return obc_fail(OBC_EINVAL, "--budget %s: exponent out of range", text);
    for (; e > 0; e--) {
      if (n > UINT64_MAX / 10) return obc_fail(OBC_EINVAL, "--budget %s: too large", text);
      n *= 10;
    }
    for (; e < 0; e++) {
      if (d > UINT64_MAX / 10) return obc_fail(OBC_EINVAL, "--budget %s: too many digits", text);
      d *= 10;
    }
    c = end;
  }
  if (*c == '%') {
    if (d > UINT64_MAX / 100) return obc_fail(OBC_EINVAL, "--budget %s: too many digits", text);
    d *= 100;
    c++;
  }
  if (!digits || *c || n == 0 || (!*tokens && n > d))
    return obc_fail(OBC_EINVAL, "--budget %s: expected tokens, a fraction <= 1 or a percentage",
                    text);
  *num = n;
  *den = d;
  return OBC_OK;
}

double evict_budget_compression_ratio(uint64_t num, uint64_t den) {
  return (double)(den - num) / (double)den;
}

int evict_budget_count(const EvictPolicy *p, size_t n, size_t *count) {
  uint64_t num = 0, den = 1;
  bool tokens = false;
  int rc = evict_budget_ratio(p->budget_text, &num, &den, &tokens);
  if (rc) return rc;
  if (tokens)
    *count = num > SIZE_MAX ? SIZE_MAX : (size_t)num;
  else if (p->budget_rule == EVICT_BUDGET_RULE_KVPRESS)
    *count = (size_t)((double)n * (1.0 - evict_budget_compression_ratio(num, den)));
  else
    *count = (size_t)((unsigned __int128)n * num / den);
  return OBC_OK;
}

size_t evict_budget_share(const EvictPolicy *p, size_t k, size_t divisor, double factor) {
  if (p->budget_rule == EVICT_BUDGET_RULE_KVPRESS) return (size_t)((double)k * factor);
  return k / divisor;
}

int evict_policy_set_allocation(EvictPolicy *p, const char *name) {
  if (!strcmp(name, "uniform"))
    p->allocation = EVICT_ALLOC_UNIFORM;
  else if (!strcmp(name, "adakv"))
    p->allocation = EVICT_ALLOC_ADAKV;
  else
    return obc_fail(OBC_EINVAL, "--alloc %s: expected uniform or adakv", name);
  return OBC_OK;
}

static const char *const protocol_names[EVICT_N_PROTOCOLS] = {
    [EVICT_PROTOCOL_AGNOSTIC] = "agnostic",
    [EVICT_PROTOCOL_AWARE] = "aware",
    [EVICT_PROTOCOL_AGNOSTIC_CAPTURED] = "agnostic-captured"};

int evict_policy_set_protocol(EvictPolicy *p, const char *name) {
  for (int i = 0; i < EVICT_N_PROTOCOLS; i++)
    if (!strcmp(name, protocol_names[i])) {
      p->protocol = (EvictProtocol)i;
      return OBC_OK;
    }
  return obc_fail(OBC_EINVAL, "--protocol %s: expected agnostic, aware or agnostic-captured", name);
}

int evict_policy_set_protect(EvictPolicy *p, const char *list) {
  char buf[EVICT_MAX_PROTECT * 64], *items[EVICT_MAX_PROTECT];
  size_t n = 0;
  int rc = obc_split_list("--protect", list, buf, sizeof buf, items, EVICT_MAX_PROTECT, &n);
  for (size_t i = 0; i < n && !rc; i++)
    if (strlen(items[i]) >= sizeof p->protect[0])
      rc = obc_fail(OBC_EINVAL, "--protect %s: span names have < 64 characters", items[i]);
  if (rc) return rc;
  p->n_protect = n;
  for (size_t i = 0; i < n; i++) snprintf(p->protect[i], sizeof p->protect[i], "%s", items[i]);
  return OBC_OK;
}

void evict_policy_protect_text(const EvictPolicy *p, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < p->n_protect && used + 1 < size; i++) {
    int n = snprintf(out + used, size - used, "%s%s", i ? "," : "", p->protect[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

int evict_policy_protected(const EvictPolicy *p, const TraceMeta *meta, const char *trace,
                           unsigned char **mask) {
  *mask = NULL;
  if (p->n_protect == 0) return OBC_OK;
  for (size_t i = 0; i < p->n_protect; i++) {
    if (trace_meta_find_span(meta, p->protect[i])) continue;
    char names[1024] = "";
    for (size_t j = 0; j < meta->n_spans; j++) {
      if (j) strncat(names, ", ", sizeof names - strlen(names) - 1);
      strncat(names, meta->spans[j].name, sizeof names - strlen(names) - 1);
    }
    return obc_fail(OBC_EINVAL, "%s: --protect %s: no such span (the trace has: %s)", trace,
                    p->protect[i], meta->n_spans ? names : "none");
  }
  unsigned char *m = obc_calloc(meta->n_prompt + 1, 1, "protected positions");
  if (!m) return OBC_ENOMEM;
  for (size_t i = 0; i < p->n_protect; i++) {
    const TraceSpan *span = trace_meta_find_span(meta, p->protect[i]);
    int64_t begin = span->begin < 0 ? 0 : span->begin;
    int64_t end = span->end > (int64_t)meta->n_prompt ? (int64_t)meta->n_prompt : span->end;
    for (int64_t q = begin; q < end; q++) m[q] = 1;
  }
  *mask = m;
  return OBC_OK;
}

const char *evict_allocation_name(EvictAllocation a) {
  return a == EVICT_ALLOC_ADAKV ? "adakv" : a == EVICT_ALLOC_PYRAMID ? "pyramid" : "uniform";
}
const char *evict_protocol_name(EvictProtocol protocol) {
  return (unsigned)protocol < EVICT_N_PROTOCOLS ? protocol_names[protocol] : "agnostic";
}
bool evict_protocol_reruns_tail(EvictProtocol protocol) {
  return protocol == EVICT_PROTOCOL_AGNOSTIC || protocol == EVICT_PROTOCOL_AWARE;
}

int evict_policy_budget_tokens(const EvictPolicy *p, size_t n_candidates, size_t *tokens) {
  if (p->kind == EVICT_SCORE_PRESET) return evict_preset_budget_tokens(p, n_candidates, tokens);
  size_t k = 0;
  int rc = evict_budget_count(p, n_candidates, &k);
  if (rc) return rc;
  if (k == 0 || k > n_candidates)
    return obc_fail(OBC_EINVAL, "--budget %s: %zu tokens (expected 1..%zu, the %s)", p->budget_text,
                    k, n_candidates,
                    p->protocol == EVICT_PROTOCOL_AWARE ? "prompt positions"
                                                        : "context positions before the question");
  size_t fixed = p->sinks + (p->kind == EVICT_SCORE_STREAMING ? 0 : p->recent);
  if (fixed > k || (p->kind == EVICT_SCORE_STREAMING && p->sinks >= k && k < n_candidates))
    return obc_fail(OBC_EINVAL,
                    "--budget %s: %zu tokens leave no room beside %zu sinks and a "
                    "recent window of %zu (hint: a larger budget or fewer --sinks/--recent)",
                    p->budget_text, k, p->sinks, p->recent);
  *tokens = k;
  return OBC_OK;
}

int evict_policy_candidates(const EvictPolicy *p, const TraceMeta *meta, size_t *n) {
  *n = meta->n_prompt;
  const TraceSpan *question = trace_meta_find_span(meta, "question");
  if (!question) return OBC_OK; /* no question: the whole prompt is the context */
  if (p->protocol == EVICT_PROTOCOL_AWARE) {
    /* context + question compressed; the template tail and the answer
     * prefix after the question are not candidates */
    if (question->end <= 0 || question->end > (int64_t)meta->n_prompt)
      return obc_fail(OBC_EINVAL,
                      "--protocol aware: the \"question\" span ends at %lld, outside the "
                      "prompt's positions 1..%zu",
                      (long long)question->end, meta->n_prompt);
    *n = (size_t)question->end;
    return OBC_OK;
  }
  if (question->begin <= 0 || question->begin >= (int64_t)meta->n_prompt)
    return obc_fail(OBC_EINVAL,
                    "--protocol %s: the \"question\" span begins at %lld, outside the "
                    "prompt's positions 1..%zu (hint: --protocol aware)",
                    evict_protocol_name(p->protocol), (long long)question->begin,
                    meta->n_prompt - 1);
  *n = (size_t)question->begin;
  return OBC_OK;
}

void evict_keep_set_free(EvictKeepSet *k) {
  free(k->keep);
  free(k->n_kept);
  memset(k, 0, sizeof *k);
}

/* A uniform number in [0, 1) from (seed, layer, head, position): the
 * splitmix64 finaliser, so every run and thread count agrees. */
static double seeded_uniform(uint64_t seed, size_t layer, size_t head, size_t position) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + layer * 0xBF58476D1CE4E5B9ULL +
               head * 0x94D049BB133111EBULL + position + 1;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return (double)(x >> 11) / 9007199254740992.0;
}

/* Sinks, recent window and the best `extra` of the middle: marks keep (n)
 * for candidates [0, n) of one head. ranked: scratch (n). */
static void select_head(const double *scores, size_t n, size_t sinks, size_t recent, size_t extra,
                        unsigned char *keep, size_t *ranked) {
  for (size_t p = 0; p < sinks && p < n; p++) keep[p] = 1;
  for (size_t p = n - recent; p < n; p++) keep[p] = 1;
  size_t middle = n - sinks - recent;
  if (extra > middle) extra = middle;
  select_rank_top(scores + sinks, middle, extra, ranked);
  for (size_t i = 0; i < extra; i++) keep[sinks + ranked[i]] = 1;
}

/* Higher score first, NaN last, then lower head, then lower position. */
static int candidate_order(const void *a, const void *b) {
  const EvictCandidate *x = a, *y = b;
  bool xn = isnan(x->score), yn = isnan(y->score);
  if (xn != yn) return xn ? 1 : -1;
  if (!xn && x->score != y->score) return x->score > y->score ? -1 : 1;
  if (x->head != y->head) return x->head < y->head ? -1 : 1;
  return x->position < y->position ? -1 : x->position > y->position;
}

void evict_keep_layer_best(const double *scores, size_t n_kv_heads, size_t n, size_t n_prompt,
                           size_t rest, unsigned char *keep, EvictCandidate *pool) {
  size_t n_pool = 0;
  for (size_t g = 0; g < n_kv_heads; g++)
    for (size_t q = 0; q < n; q++)
      if (!keep[g * n_prompt + q]) pool[n_pool++] = (EvictCandidate){scores[g * n + q], g, q};
  qsort(pool, n_pool, sizeof *pool, candidate_order);
  for (size_t i = 0; i < rest && i < n_pool; i++)
    keep[pool[i].head * n_prompt + pool[i].position] = 1;
}

void evict_keep_count_layer(EvictKeepSet *k, size_t layer) {
  for (size_t g = 0; g < k->n_kv_heads; g++) {
    const unsigned char *keep = k->keep + (layer * k->n_kv_heads + g) * k->n_prompt;
    size_t count = 0;
    for (size_t q = 0; q < k->n_candidates; q++) count += keep[q];
    k->n_kept[layer * k->n_kv_heads + g] = count;
  }
}

/* Streaming with protected positions: the sinks, the protected candidates,
 * then the most recent others until the head keeps k. */
static void select_streaming_protected(size_t n, size_t sinks, size_t k,
                                       const unsigned char *protect, unsigned char *keep) {
  size_t count = 0;
  for (size_t q = 0; q < n; q++)
    if (q < sinks || protect[q]) keep[q] = 1, count++;
  for (size_t q = n; q-- > 0 && count < k;)
    if (!keep[q]) keep[q] = 1, count++;
}

int evict_keep_from_scores(const EvictPolicy *p, const double *scores, size_t n_layers,
                           size_t n_kv_heads, size_t n_prompt, size_t n_candidates,
                           const unsigned char *protect, EvictKeepSet *out) {
  if (p->kind == EVICT_SCORE_PRESET)
    return evict_preset_keep(p, scores, n_layers, n_kv_heads, n_prompt, n_candidates, protect, out);
  memset(out, 0, sizeof *out);
  size_t k = 0;
  int rc = evict_policy_budget_tokens(p, n_candidates, &k);
  if (rc) return rc;
  bool streaming = p->kind == EVICT_SCORE_STREAMING;
  size_t sinks = p->sinks, recent = streaming ? 0 : p->recent;
  if (streaming) recent = k - (sinks < k ? sinks : k);
  if (sinks > k) sinks = k;
  size_t n = n_candidates, G = n_kv_heads;
  /* Protected candidates not already kept as sinks (or, scored, as recent):
   * they take their share of the budget first. */
  size_t n_protected = 0;
  for (size_t q = 0; protect && q < n; q++)
    n_protected += protect[q] && q >= sinks && (streaming || q < n - recent);
  if (sinks + (streaming ? 0 : recent) + n_protected > k)
    return obc_fail(OBC_EINVAL,
                    "--budget %s: %zu tokens leave no room for the %zu protected positions "
                    "(--protect, inside the budget) beside %zu sinks and a recent window of "
                    "%zu (hint: a larger budget)",
                    p->budget_text, k, n_protected, sinks, streaming ? 0 : recent);
  out->n_layers = n_layers;
  out->n_kv_heads = G;
  out->n_prompt = n_prompt;
  out->n_candidates = n;
  out->budget = k;
  out->policy = *p;
  evict_policy_score_name(p, out->policy.score, sizeof out->policy.score);
  out->keep = obc_calloc(n_layers * G * n_prompt, 1, "kept positions");
  out->n_kept = obc_calloc(n_layers * G, sizeof(size_t), "kept counts");
  size_t *ranked = obc_malloc((n + 1) * sizeof *ranked, "selection ranking");
  double *boosted = protect ? obc_malloc((n + 1) * sizeof *boosted, "protected scores") : NULL;
  EvictCandidate *pool = p->allocation == EVICT_ALLOC_ADAKV
                             ? obc_malloc((G * n + 1) * sizeof *pool, "AdaKV candidates")
                             : NULL;
  if (!out->keep || !out->n_kept || !ranked || (protect && !boosted) ||
      (p->allocation == EVICT_ALLOC_ADAKV && !pool)) {
    free(ranked);
    free(boosted);
    free(pool);
    evict_keep_set_free(out);
    return OBC_ENOMEM;
  }
  size_t per_head = k;
  if (p->allocation == EVICT_ALLOC_ADAKV) {
    per_head = (size_t)ceil(p->adakv_floor * (double)k);
    if (per_head < sinks + recent + n_protected) per_head = sinks + recent + n_protected;
    if (per_head > k) per_head = k;
  }
  for (size_t l = 0; l < n_layers; l++) {
    for (size_t g = 0; g < G; g++) {
      size_t head = l * G + g;
      unsigned char *keep = out->keep + head * n_prompt;
      const double *head_scores = scores + head * n;
      if (protect && streaming) {
        select_streaming_protected(n, sinks, per_head, protect, keep);
      } else {
        if (protect) { /* protected candidates rank first (kvpress: score max + 1) */
          for (size_t q = 0; q < n; q++) boosted[q] = protect[q] ? INFINITY : head_scores[q];
          head_scores = boosted;
        }
        select_head(head_scores, n, sinks, recent, per_head - sinks - recent, keep, ranked);
      }
      for (size_t q = n; q < n_prompt; q++) keep[q] = 1; /* after the candidates: always kept */
    }
    if (p->allocation == EVICT_ALLOC_ADAKV && per_head < k)
      evict_keep_layer_best(scores + l * G * n, G, n, n_prompt, (k - per_head) * G,
                            out->keep + l * G * n_prompt, pool);
    evict_keep_count_layer(out, l);
  }
  free(ranked);
  free(boosted);
  free(pool);
  return OBC_OK;
}

size_t evict_rows_ending_at(const TraceMeta *meta, size_t end) {
  size_t r = trace_meta_row_index(meta, (int64_t)end);
  size_t count = 0;
  while (r > count && meta->row_positions[r - 1 - count] == (int64_t)(end - 1 - count)) count++;
  return count;
}

/* Scores of the candidates of one head into out (n); steps: the resolved
 * decode steps (first, count) of oracle / decode_attn. */
static int head_scores(const EvictPolicy *p, ScoreHead *h, size_t layer, size_t g, size_t n,
                       size_t window, const size_t steps[2], double *oracle, double *sweep,
                       double *out) {
  switch (p->kind) {
    case EVICT_SCORE_PRESET: /* whole layers at once: evict_preset_scores */ return OBC_EINVAL;
    case EVICT_SCORE_RANDOM:
      for (size_t q = 0; q < n; q++) out[q] = seeded_uniform(p->seed, layer, g, q);
      return OBC_OK;
    case EVICT_SCORE_STREAMING: /* the most recent score highest */
      for (size_t q = 0; q < n; q++) out[q] = (double)q;
      return OBC_OK;
    case EVICT_SCORE_ORACLE: {
      int rc = oracle_eviction_error(&h->data, steps[0], steps[1], OBC_PRECISION_DOUBLE, oracle);
      if (!rc) memcpy(out, oracle, n * sizeof *out);
      return rc;
    }
    case EVICT_SCORE_DECODE_ATTN: {
      int rc = oracle_decode_attention(&h->data, steps[0], steps[1], OBC_PRECISION_DOUBLE, oracle);
      if (!rc) memcpy(out, oracle, n * sizeof *out);
      return rc;
    }
    case EVICT_SCORE_QUANTITY: {
      OracleHead data = h->data;
      data.n_prompt = n; /* the window ends at the candidates' end */
      ScoreOptions options;
      score_options_default(&options);
      int rc = score_window_sweep(&data, &window, 1, &options, sweep);
      if (!rc) memcpy(out, sweep + (size_t)p->quantity * n, n * sizeof *out);
      return rc;
    }
  }
  return OBC_EINVAL;
}

int evict_policy_scores(TraceReader *reader, const EvictPolicy *p, double **scores_out,
                        size_t *n_candidates, size_t *window_out) {
  const TraceMeta *meta = trace_meta(reader);
  *scores_out = NULL;
  size_t n = 0, first = 0;
  int rc = evict_policy_candidates(p, meta, &n);
  if (rc) return obc_fail_context(rc, "%s", trace_path(reader));
  size_t window = 0;
  if (p->kind == EVICT_SCORE_QUANTITY) {
    size_t captured = evict_rows_ending_at(meta, n);
    if (captured == 0)
      return obc_fail(OBC_EINVAL,
                      "%s: no captured prompt rows end at position %zu (the %s window needs "
                      "them; hint: capture with more --rows%s)",
                      trace_path(reader), n - 1, evict_protocol_name(p->protocol),
                      p->protocol == EVICT_PROTOCOL_AWARE ? "" : ", or --protocol aware");
    window =
        p->window ? p->window : (captured < EVICT_DEFAULT_WINDOW ? captured : EVICT_DEFAULT_WINDOW);
    if (window > captured)
      return obc_fail(OBC_EINVAL,
                      "%s: --window %zu (expected 1..%zu, the captured rows ending "
                      "at position %zu)",
                      trace_path(reader), window, captured, n - 1);
  }
  size_t steps[2] = {0, 0}; /* first step, count */
  bool decode = p->kind == EVICT_SCORE_ORACLE || p->kind == EVICT_SCORE_DECODE_ATTN;
  if (decode) {
    OracleSteps wanted = evict_policy_steps(p);
    rc = oracle_steps_resolve(&wanted, trace_meta_decode_rows(meta, &first), trace_path(reader),
                              &steps[0], &steps[1]);
    if (rc) return rc;
  }
  size_t L = meta->model.n_layers, G = meta->model.n_kv_heads;
  size_t planes = p->kind == EVICT_SCORE_PRESET ? evict_preset_score_planes(p) : 1;
  double *scores = obc_malloc(planes * L * G * n * sizeof *scores, "policy scores");
  if (p->kind == EVICT_SCORE_PRESET) {
    rc = scores ? evict_preset_scores(reader, p, n, scores, &window) : OBC_ENOMEM;
    if (rc) {
      free(scores);
      return rc;
    }
    *scores_out = scores;
    *n_candidates = n;
    *window_out = window;
    return OBC_OK;
  }
  double *oracle = obc_malloc(meta->n_prompt * sizeof *oracle, "oracle@1");
  double *sweep = obc_malloc(OBC_Q_COUNT * n * sizeof *sweep, "score sweep");
  ScoreHead h;
  memset(&h, 0, sizeof h);
  bool need_head = p->kind == EVICT_SCORE_QUANTITY || decode;
  rc = scores && oracle && sweep ? OBC_OK : OBC_ENOMEM;
  if (!rc && need_head) rc = score_head_alloc(&h, reader);
  for (size_t l = 0; l < L && !rc; l++) {
    for (size_t g = 0; g < G && !rc; g++) {
      if (need_head && (rc = score_head_read(&h, reader, l, g))) break;
      rc = head_scores(p, &h, l, g, n, window, steps, oracle, sweep, scores + (l * G + g) * n);
      if (rc) obc_fail_context(rc, "%s: layer %zu, KV head %zu", trace_path(reader), l, g);
    }
  }
  score_head_free(&h);
  free(oracle);
  free(sweep);
  if (rc) {
    free(scores);
    return rc;
  }
  *scores_out = scores;
  *n_candidates = n;
  *window_out = window;
  return OBC_OK;
}

int evict_policy_apply_scores(TraceReader *reader, const EvictPolicy *p, EvictKeepSet *out,
                              double **scores_out) {
  const TraceMeta *meta = trace_meta(reader);
  memset(out, 0, sizeof *out);
  if (scores_out) *scores_out = NULL;
  size_t n = 0, k = 0, window = 0;
  unsigned char *protect = NULL;
  int rc = evict_policy_candidates(p, meta, &n);
  if (!rc) rc = evict_policy_budget_tokens(p, n, &k); /* fail fast, before the scores */
  if (rc) return obc_fail_context(rc, "%s", trace_path(reader));
  if ((rc = evict_policy_protected(p, meta, trace_path(reader), &protect))) return rc;
  double *scores = NULL;
  rc = evict_policy_scores(reader, p, &scores, &n, &window);
  if (!rc && (rc = evict_keep_from_scores(p, scores, meta->model.n_layers, meta->model.n_kv_heads,
                                          meta->n_prompt, n, protect, out)))
    obc_fail_context(rc, "%s", trace_path(reader));
  if (!rc) {
    out->window = window;
    snprintf(out->trace_hash, sizeof out->trace_hash, "%s", meta->content_hash);
  }
  if (!rc && scores_out && p->kind == EVICT_SCORE_PRESET && evict_preset_score_planes(p) > 1) {
    size_t cells = meta->model.n_layers * meta->model.n_kv_heads * n;
    double *final = obc_malloc(cells * sizeof *final, "final scores");
    rc = final ? evict_preset_final_scores(p, scores, meta->model.n_layers, meta->model.n_kv_heads,
                                           n, final)
               : OBC_ENOMEM;
    free(scores);
    scores = final;
    if (rc) evict_keep_set_free(out);
  }
  if (!rc && scores_out) {
    *scores_out = scores;
    scores = NULL;
  }
  free(scores);
  free(protect);
  return rc;
}

int evict_policy_apply(TraceReader *reader, const EvictPolicy *p, EvictKeepSet *out) {
  return evict_policy_apply_scores(reader, p, out, NULL);
}
