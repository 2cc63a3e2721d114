/* Policies (evict/policy.h): the options that make one, the one budget
 * count, the candidates and protected positions of a trace, and the scores
 * and kept sets of a policy through its row of the table of score sources
 * (evict/source.h). */
#include "evict/policy.h"

#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_parse.h"
#include "common/obc_text.h"
#include "evict/score_file.h"

void evict_policy_default(EvictPolicy *p) {
  memset(p, 0, sizeof *p);
  snprintf(p->score, sizeof p->score, "obc_vk");
  p->source = evict_source_find("obc_vk", 6);
  snprintf(p->budget_text, sizeof p->budget_text, "10%%");
  p->budget_rule = EVICT_BUDGET_RULE_FLOOR;
  p->adakv_floor = EVICT_DEFAULT_ADAKV_FLOOR;
  p->seed = 1;
}

#define OLD_PREFIX "preset:"

void evict_policy_canonical_score(const char *name, char *out, size_t size) {
  bool old = !strncmp(name, OLD_PREFIX, strlen(OLD_PREFIX));
  snprintf(out, size, "%s", old ? name + strlen(OLD_PREFIX) : name);
}

/* The inner scores after '+', by EvictPresetInner ("attn" is the swap). */
static const char *const inner_names[] = {"", "obc_v", "obc_k", "obc_vk", "attn"};

void evict_policy_score_help(char *out, size_t size) {
  char quantities[512], methods[1024];
  evict_source_names(EVICT_SCORE_QUANTITY, quantities, sizeof quantities);
  evict_source_names(EVICT_SCORE_PRESET, methods, sizeof methods);
  snprintf(out, size,
           "%s (analyser quantities over --window), random (seeded), recency (--sinks + most "
           "recent), oracle (each token's true eviction error over the --oracle steps: a "
           "reference, not a bound), decode_attn (attention mass from the captured decode "
           "queries of the --oracle steps; like oracle, it sees the answer); oracle@1, "
           "oracle@T, oracle@a-b, decode_attn@a-b name the steps directly. Published methods, "
           "each as its reference implementation runs it: %s; METHOD+obc_v|obc_k|obc_vk puts "
           "OBCache's score inside one. NAME=file:PATH[:DATASET] reads a score from an HDF5 "
           "file of the same trace (a --scores-out file, for one) and keeps it as the quantities",
           quantities, methods);
}

/* The message for a name that is no row. */
static int unknown_score(const char *name) {
  char text[2048], shown[96];
  evict_policy_score_help(text, sizeof text);
  obc_text_escape(shown, sizeof shown, name, false);
  return obc_fail(OBC_EINVAL, "--score %s: unknown score (expected %s)", shown, text);
}

int evict_policy_set_score(EvictPolicy *p, const char *given) {
  char name[sizeof p->score], shown[96];
  obc_text_escape(shown, sizeof shown, given, false);
  if (evict_score_file_spelled(given) || evict_score_file_known(given)) {
    int rc = evict_score_file_resolve(given, name, sizeof name);
    if (rc) return rc;
    p->source = evict_source_file();
    p->inner = EVICT_PRESET_INNER_ATTN;
    snprintf(p->score, sizeof p->score, "%s", name);
    return OBC_OK;
  }
  if (strlen(given) >= sizeof name)
    return obc_fail(OBC_EINVAL, "--score %s: longer than %zu characters", shown, sizeof name - 1);
  evict_policy_canonical_score(given, name, sizeof name);
  if (strcmp(name, given))
    fprintf(stderr, "obcache: note: --score %s is spelled %s\n", shown, name);
  size_t len = strcspn(name, "@+");
  const EvictSource *row = evict_source_find(name, len);
  if (!row) return unknown_score(given);
  int inner = EVICT_PRESET_INNER_ATTN;
  if (name[len] == '+') {
    inner = -1;
    for (int i = EVICT_PRESET_INNER_OBC_V; i <= EVICT_PRESET_INNER_SWAP; i++)
      if (!strcmp(name + len + 1, inner_names[i])) inner = i;
    if (inner < 0)
      return obc_fail(OBC_EINVAL,
                      "--score %s: unknown score '%s' inside the method (expected obc_v, obc_k, "
                      "obc_vk, or attn for the swap test)",
                      shown, name + len + 1);
    if (!row->pairs) {
      char paired[512] = "";
      for (size_t i = 0; i < evict_source_count(); i++) {
        const EvictSource *s = evict_source_at(i);
        if (!s->pairs) continue;
        if (*paired) strncat(paired, ", ", sizeof paired - strlen(paired) - 1);
        strncat(paired, s->name, sizeof paired - strlen(paired) - 1);
      }
      return obc_fail(OBC_EINVAL,
                      "--score %s: %s has no attention score to replace (+%s pairs with %s)", shown,
                      row->name, name + len + 1, paired);
    }
  }
  if (name[len] == '@') {
    if (!row->steps)
      return obc_fail(OBC_EINVAL,
                      "--score %s: %s takes no decode steps (only oracle and "
                      "decode_attn do)",
                      shown, row->name);
    int rc = oracle_steps_parse("--score", name + len + 1, &p->steps);
    if (rc) return rc;
    p->steps_given = true;
  }
  p->source = row;
  p->inner = inner;
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
  return p->source && p->source->steps_all ? ORACLE_STEPS_ALL : ORACLE_STEPS_ONE;
}

void evict_policy_score_name(const EvictPolicy *p, char *out, size_t size) {
  OracleSteps steps = evict_policy_steps(p);
  if (!p->source || !p->source->steps)
    snprintf(out, size, "%s", p->score);
  else if (p->source->steps_all && steps.all) /* the default, unnamed */
    snprintf(out, size, "%s", p->source->name);
  else
    oracle_steps_name(p->source->name, &steps, out, size);
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
  return p->source->count(p, n_candidates, tokens);
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

int evict_keep_from_scores(const EvictPolicy *p, const double *scores, size_t n_layers,
                           size_t n_kv_heads, size_t n_prompt, size_t n_candidates,
                           const unsigned char *protect, EvictKeepSet *out) {
  return p->source->keep(p, scores, n_layers, n_kv_heads, n_prompt, n_candidates, protect, out);
}

size_t evict_rows_ending_at(const TraceMeta *meta, size_t end) {
  size_t r = trace_meta_row_index(meta, (int64_t)end);
  size_t count = 0;
  while (r > count && meta->row_positions[r - 1 - count] == (int64_t)(end - 1 - count)) count++;
  return count;
}

int evict_policy_scores(TraceReader *reader, const EvictPolicy *p, double **scores_out,
                        size_t *n_candidates, size_t *window_out) {
  const TraceMeta *meta = trace_meta(reader);
  *scores_out = NULL;
  size_t n = 0, window = 0;
  int rc = evict_policy_candidates(p, meta, &n);
  if (rc) return obc_fail_context(rc, "%s", trace_path(reader));
  size_t cells = p->source->planes * meta->model.n_layers * meta->model.n_kv_heads * n;
  double *scores = obc_malloc((cells + 1) * sizeof *scores, "policy scores");
  rc = scores ? p->source->scores(reader, p, n, scores, &window) : OBC_ENOMEM;
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
  if (!rc && scores_out && p->source->final_scores) {
    size_t cells = meta->model.n_layers * meta->model.n_kv_heads * n;
    double *final = obc_malloc((cells + 1) * sizeof *final, "final scores");
    rc = final ? p->source->final_scores(p, scores, meta->model.n_layers, meta->model.n_kv_heads, n,
                                         final)
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
