/* Dynamic eviction (evict/dynamic.h): one teacher-forced pass over the text
 * per (score, budget), with the runtime's capture seam giving every new row's
 * attention, query and output per layer, running scores per (layer, KV head,
 * position), and runtime_evict dropping the lowest-scoring tokens. */
#include "evict/dynamic.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus/niah_haystack.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_json.h"
#include "common/obc_time.h"
#include "oracle/exact_forms.h"
#include "tokenizer/text_input.h"
#include "runtime/generate.h"
#include "runtime/runtime.h"

const char *const evict_dynamic_score_names[EVICT_DYNAMIC_N_SCORES] = {
    [EVICT_DYNAMIC_ATTN] = "attn",       [EVICT_DYNAMIC_OBC_V] = "obc_v",
    [EVICT_DYNAMIC_OBC_K] = "obc_k",     [EVICT_DYNAMIC_OBC_VK] = "obc_vk",
    [EVICT_DYNAMIC_RECENCY] = "recency",
};

/* The scores a run evicts by, and the full cache it is compared with. */
typedef enum {
  DYN_ATTN = EVICT_DYNAMIC_ATTN,
  DYN_OBC_V = EVICT_DYNAMIC_OBC_V,
  DYN_OBC_K = EVICT_DYNAMIC_OBC_K,
  DYN_OBC_VK = EVICT_DYNAMIC_OBC_VK,
  DYN_STREAMING = EVICT_DYNAMIC_RECENCY,
  DYN_FULL = EVICT_DYNAMIC_N_SCORES,
} DynScore;

void evict_dynamic_score_list(const char *separator, const char *last, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < EVICT_DYNAMIC_N_SCORES && used < size; i++) {
    const char *joint = i == 0 ? "" : i + 1 == EVICT_DYNAMIC_N_SCORES ? last : separator;
    int n = snprintf(out + used, size - used, "%s%s", joint, evict_dynamic_score_names[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

int evict_dynamic_score_parse(const char *option, const char *name, EvictDynamicScore *score) {
  for (size_t i = 0; i < EVICT_DYNAMIC_N_SCORES; i++)
    if (!strcmp(name, evict_dynamic_score_names[i])) {
      *score = (EvictDynamicScore)i;
      return OBC_OK;
    }
  char expected[128];
  evict_dynamic_score_list(", ", " or ", expected, sizeof expected);
  return obc_fail(OBC_EINVAL, "%s %s: not a dynamic score (expected %s)", option, name, expected);
}

static int dyn_score_from_name(const char *name, DynScore *out) {
  EvictDynamicScore score = EVICT_DYNAMIC_ATTN;
  int rc = evict_dynamic_score_parse("--scores", name, &score);
  if (!rc) *out = (DynScore)score;
  return rc;
}

void evict_dynamic_config_default(EvictDynamicConfig *c) {
  memset(c, 0, sizeof *c);
  c->text = "kjv";
  c->max_text_bytes = OBC_TEXT_MAX_BYTES;
  c->n_tokens = 4096;
  c->budgets[0] = 256, c->budgets[1] = 512, c->budgets[2] = 1024;
  c->n_budgets = 3;
  for (size_t i = 0; i < EVICT_DYNAMIC_N_SCORES; i++)
    snprintf(c->scores[i], sizeof c->scores[0], "%s", evict_dynamic_score_names[i]);
  c->n_scores = EVICT_DYNAMIC_N_SCORES;
  c->sinks = 0;
  c->recent = 0;
  c->chunk = 16;
  c->ppl_window = 256;
}

/* The first n_tokens tokens of the text (BOS first when the model adds one). */
static int text_tokens(const Model *model, const char *spec, size_t max_text_bytes, size_t n_tokens,
                       int32_t **out) {
  if (!model->tokenizer)
    return obc_fail(OBC_EINVAL, "%s: the model has no tokenizer (dynamic eviction reads a text)",
                    model->path);
  NiahHaystack haystack;
  char *text = NULL;
  size_t length = 0;
  int rc = OBC_OK;
  if (!strcmp(spec, "kjv")) {
    rc = niah_haystack_open("kjv", &haystack);
    if (rc) return rc;
    size_t capacity = n_tokens * 8 + 1024; /* bytes: far more than n_tokens tokens */
    text = obc_malloc(capacity + 1, "text");
    for (size_t i = 0; text && length + 1 < capacity; i++) {
      size_t n = 0;
      const char *sentence = niah_haystack_sentence(&haystack, i, &n);
      if (length + n + 1 >= capacity) break;
      if (length) text[length++] = ' ';
      memcpy(text + length, sentence, n);
      length += n;
    }
    if (text) text[length] = '\0';
    niah_haystack_close(&haystack);
    if (!text) return OBC_ENOMEM;
  } else if ((rc = text_read_file(spec, max_text_bytes, &text, &length))) {
    return rc;
  }
  int32_t *ids = NULL;
  size_t n_ids = 0;
  rc = tokenizer_encode(model->tokenizer, text, length, &ids, &n_ids);
  free(text);
  if (rc) return rc;
  int32_t bos = tokenizer_adds_bos(model->tokenizer) ? tokenizer_bos_id(model->tokenizer) : -1;
  size_t offset = bos >= 0 ? 1 : 0;
  if (n_ids + offset < n_tokens) {
    free(ids);
    return obc_fail(OBC_EINVAL,
                    "%s: %zu tokens (expected at least --tokens %zu; hint: a longer "
                    "text)",
                    spec, n_ids + offset, n_tokens);
  }
  int32_t *tokens = obc_malloc(n_tokens * sizeof *tokens, "text tokens");
  if (!tokens) {
    free(ids);
    return OBC_ENOMEM;
  }
  if (bos >= 0) tokens[0] = bos;
  memcpy(tokens + offset, ids, (n_tokens - offset) * sizeof *tokens);
  free(ids);
  *out = tokens;
  return OBC_OK;
}

/* One policy run's state. */
typedef struct {
  Runtime *runtime;
  const ModelConfig *config;
  DynScore score;
  size_t budget, sinks, recent, max_context;
  double *score_of;     /* (n_layers, n_kv_heads, max_context) running scores */
  unsigned char *alive; /* (n_layers, n_kv_heads, max_context) cached and not evicted */
  double *v_sq;         /* (n_layers, n_kv_heads, max_context) ||v_p||^2 */
  float *vo;            /* (max_context, rows of a block) v_p . o_r scratch */
} DynRun;

/* Adds the new rows' contributions to the running scores (capture seam).
 * z_ip comes back from A and lse (z = log A + lse, exact for live keys) and
 * v_p . o_i from one sgemm per query head, so a row costs about what its
 * attention did. */
static int accumulate(void *user, const RuntimeLayerCapture *view) {
  DynRun *run = user;
  if (run->score == DYN_STREAMING || run->score == DYN_FULL) return 0;
  const ModelConfig *c = run->config;
  RuntimeCache *cache = runtime_cache(run->runtime);
  size_t d = view->head_dim, group = view->n_heads / view->n_kv_heads, m = view->n_rows;
  size_t n_keys = view->n_keys;
  for (size_t g = 0; g < view->n_kv_heads; g++) {
    size_t head = view->layer * c->n_kv_heads + g;
    double *S = run->score_of + head * run->max_context;
    double *v_sq = run->v_sq + head * run->max_context;
    const float *V = runtime_cache_v(cache, view->layer, g);
    for (size_t p = view->pos0; p < view->pos0 + view->n_tokens; p++) {
      double sq = 0.0;
      for (size_t e = 0; e < d; e++) sq += (double)V[p * d + e] * V[p * d + e];
      v_sq[p] = sq;
    }
    for (size_t j = 0; j < group; j++) {
      size_t h = g * group + j;
      const float *O = view->o + h * m * d;
      if (run->score != DYN_ATTN) /* vo[p * m + r] = v_p . o_r */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_keys, (int)m, (int)d, 1.0f, V,
                    (int)d, O, (int)d, 0.0f, run->vo, (int)m);
      for (size_t r = 0; r < m; r++) {
        const float *A = view->attn + (h * m + r) * n_keys;
        const float *o = O + r * d;
        double lse = view->lse[h * m + r], o_sq = 0.0;
        for (size_t e = 0; e < d; e++) o_sq += (double)o[e] * o[e];
        size_t n_live = view->row_positions[r] + 1;
        for (size_t p = 0; p < n_live; p++) {
          double a = A[p];
          if (a <= 0.0) continue; /* evicted (or underflow): no contribution */
          if (run->score == DYN_ATTN) {
            S[p] += a;
            continue;
          }
          double z = log(a) + lse, dd, vd;
          oracle_pair_norms_from_dots(v_sq[p], run->vo[p * m + r], o_sq, &dd, &vd);
          double sv = oracle_form_obc_v(a, v_sq[p]), sk = oracle_form_obc_k(a, z, dd);
          S[p] += run->score == DYN_OBC_V   ? sv
                  : run->score == DYN_OBC_K ? sk
                                            : sv + sk + oracle_form_obc_vk_cross(a, z, vd);
        }
      }
    }
  }
  return 0;
}

/* Evicts down to the budget in every (layer, KV head) of a cache of length
 * positions. */
static int evict_to_budget(DynRun *run, size_t length) {
  const ModelConfig *c = run->config;
  size_t protect_from = length > run->recent ? length - run->recent : 0;
  for (size_t head = 0; head < c->n_layers * c->n_kv_heads; head++) {
    double *S = run->score_of + head * run->max_context;
    unsigned char *alive = run->alive + head * run->max_context;
    size_t count = 0;
    for (size_t p = 0; p < length; p++) count += alive[p];
    while (count > run->budget) {
      size_t worst = length;
      for (size_t p = run->sinks; p < protect_from; p++) {
        if (!alive[p]) continue;
        double s = run->score == DYN_STREAMING ? (double)p : S[p];
        double w = worst < length ? (run->score == DYN_STREAMING ? (double)worst : S[worst]) : 0;
        if (worst == length || s < w) worst = p;
      }
      if (worst == length) break; /* only sinks and recent left */
      int rc = runtime_evict(run->runtime, head / c->n_kv_heads, head % c->n_kv_heads, worst);
      if (rc) return rc;
      alive[worst] = 0;
      count--;
    }
  }
  return OBC_OK;
}

/* One teacher-forced pass; nll (n - 1): nll[t] = -log p(tokens[t+1] | ..t).
 * scores_out (n_layers, n_kv_heads, n), may be NULL: the running scores at
 * the end. */
/* The recent window of a budget: --recent tokens, or its share of the budget. */
static size_t recent_of(const EvictDynamicConfig *cfg, size_t budget) {
  return cfg->recent_percent ? budget * cfg->recent_percent / 100 : cfg->recent;
}

static int run_policy(const Model *model, const EvictDynamicConfig *cfg, DynScore score,
                      size_t budget, const int32_t *tokens, double *nll, double *scores_out) {
  const ModelConfig *c = &model->config;
  size_t n = cfg->n_tokens, vocab = c->vocab_size, L = c->n_layers, G = c->n_kv_heads;
  DynRun run = {.config = c,
                .score = score,
                .budget = budget,
                .sinks = cfg->sinks,
                .recent = recent_of(cfg, budget),
                .max_context = n};
  RuntimeOptions options = {.max_context = n, .threads = cfg->threads, .backend = cfg->device};
  size_t step_max = score == DYN_FULL ? 256 : cfg->chunk;
  /* Positions [0, first) are filled in large blocks: no eviction is due yet.
   * A budget of the whole text (the tests) runs every block as a chunk. */
  size_t first = score == DYN_FULL || budget >= n ? 0 : budget;
  size_t block_max = first > step_max ? (first < 256 ? first : 256) : step_max;
  float *logits = obc_malloc(block_max * vocab * sizeof *logits, "logits");
  size_t *positions = obc_malloc(block_max * sizeof *positions, "row positions");
  bool scored = score != DYN_FULL && score != DYN_STREAMING;
  if (score != DYN_FULL) {
    run.score_of = obc_calloc(L * G * n, sizeof(double), "running scores");
    run.alive = obc_calloc(L * G * n, 1, "cached positions");
    run.v_sq = obc_calloc(L * G * n, sizeof(double), "value norms");
    run.vo = obc_malloc(n * block_max * sizeof(float), "value-output products");
  }
  int rc = logits && positions &&
                   (score == DYN_FULL || (run.score_of && run.alive && run.v_sq && run.vo))
               ? OBC_OK
               : OBC_ENOMEM;
  if (!rc) rc = runtime_create(model, &options, &run.runtime);
  for (size_t pos = 0; pos < n && !rc;) {
    size_t block = pos < first ? first - pos : step_max;
    if (block > block_max) block = block_max;
    if (block > n - pos) block = n - pos;
    for (size_t t = 0; t < block; t++) positions[t] = pos + t;
    RuntimeCapture capture = {.row_positions = positions,
                              .n_rows = block,
                              .want_attn = true,
                              .user = &run,
                              .on_layer = accumulate};
    rc = runtime_forward(run.runtime, tokens + pos, block, RUNTIME_LOGITS_ALL, logits,
                         scored ? &capture : NULL);
    if (rc) break;
    for (size_t t = 0; t < block; t++)
      if (pos + t + 1 < n)
        nll[pos + t] = generate_token_nll(logits + t * vocab, vocab, tokens[pos + t + 1]);
    if (run.alive)
      for (size_t head = 0; head < L * G; head++) memset(run.alive + head * n + pos, 1, block);
    pos += block;
    if (score != DYN_FULL) rc = evict_to_budget(&run, pos);
  }
  if (!rc && scores_out && run.score_of)
    memcpy(scores_out, run.score_of, L * G * n * sizeof(double));
  runtime_free(run.runtime);
  free(logits);
  free(positions);
  free(run.score_of);
  free(run.alive);
  free(run.v_sq);
  free(run.vo);
  return rc;
}

typedef struct {
  const char *score;
  size_t budget;
  double *nll; /* (n - 1) */
} DynResult;

static double window_ppl(const double *nll, size_t from, size_t to) {
  double sum = 0.0;
  for (size_t t = from; t < to; t++) sum += nll[t];
  return to > from ? exp(sum / (double)(to - from)) : NAN;
}

/* dynamic.csv and dynamic.json, both or neither (an output set). */
static int write_files(ObcOutputSet *set, const EvictDynamicConfig *cfg, const Model *model,
                       const DynResult *results, size_t n_results, const char *command_line) {
  FILE *fp = NULL;
  int rc = obc_output_open(set, "dynamic.csv", &fp);
  if (rc) return rc;
  size_t m = cfg->n_tokens - 1, w = cfg->ppl_window;
  fprintf(fp, "score,budget,position,ppl_window,ppl_cumulative\n");
  for (size_t i = 0; i < n_results; i++)
    for (size_t end = w; end <= m; end += w)
      fprintf(fp, "%s,%zu,%zu,%.6g,%.6g\n", results[i].score, results[i].budget, end,
              window_ppl(results[i].nll, end - w, end), window_ppl(results[i].nll, 0, end));
  if ((rc = obc_output_close(set, fp))) return rc;
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "kind", "dynamic_eviction");
  cJSON_AddStringToObject(root, "tool_version", OBC_VERSION);
  cJSON_AddStringToObject(root, "command_line", command_line ? command_line : "");
  cJSON_AddStringToObject(root, "model", model->path);
  cJSON_AddStringToObject(root, "text", cfg->text);
  cJSON_AddNumberToObject(root, "tokens", (double)cfg->n_tokens);
  cJSON_AddNumberToObject(root, "sinks", (double)cfg->sinks);
  cJSON_AddNumberToObject(root, "recent", (double)cfg->recent);
  cJSON_AddNumberToObject(root, "recent_percent", (double)cfg->recent_percent);
  cJSON_AddNumberToObject(root, "chunk", (double)cfg->chunk);
  cJSON_AddNumberToObject(root, "ppl_window", (double)cfg->ppl_window);
  cJSON *runs = cJSON_AddArrayToObject(root, "runs");
  for (size_t i = 0; i < n_results; i++) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "score", results[i].score);
    cJSON_AddNumberToObject(r, "budget", (double)results[i].budget);
    cJSON_AddNumberToObject(r, "ppl", window_ppl(results[i].nll, 0, m));
    cJSON_AddItemToArray(runs, r);
  }
  return obc_output_json(set, "dynamic.json", root);
}

static int write_outputs(const char *dir, const EvictDynamicConfig *cfg, const Model *model,
                         const DynResult *results, size_t n_results, const char *command_line) {
  ObcOutputSet set;
  int rc = obc_output_begin(&set, dir);
  if (!rc) rc = write_files(&set, cfg, model, results, n_results, command_line);
  return obc_output_end(&set, rc);
}

static void print_table(const EvictDynamicConfig *cfg, const DynResult *results, size_t n_results) {
  size_t m = cfg->n_tokens - 1, marks[5], n_marks = 0;
  for (size_t k = 1; k <= 4; k++) {
    size_t end = m * k / 4;
    if (end > 0) marks[n_marks++] = end;
  }
  char recent[32];
  if (cfg->recent_percent)
    snprintf(recent, sizeof recent, "%zu%% of the budget", cfg->recent_percent);
  else
    snprintf(recent, sizeof recent, "%zu", cfg->recent);
  printf(
      "\nperplexity of the text (cumulative up to the position), chunk %zu, sinks %zu, recent "
      "%s\n%-10s %7s",
      cfg->chunk, cfg->sinks, recent, "score", "budget");
  for (size_t k = 0; k < n_marks; k++) printf(" %9zu", marks[k]);
  printf("\n");
  for (size_t i = 0; i < n_results; i++) {
    printf("%-10s %7zu", results[i].score, results[i].budget);
    for (size_t k = 0; k < n_marks; k++) printf(" %9.3f", window_ppl(results[i].nll, 0, marks[k]));
    printf("\n");
  }
}

int evict_dynamic_run(const Model *model, const EvictDynamicConfig *cfg, const char *out_dir,
                      const char *command_line) {
  DynScore kinds[EVICT_DYNAMIC_MAX];
  for (size_t s = 0; s < cfg->n_scores; s++) {
    int rc = dyn_score_from_name(cfg->scores[s], &kinds[s]);
    if (rc) return rc;
  }
  if (cfg->n_tokens < 2 || cfg->chunk < 1 || cfg->ppl_window < 1 ||
      cfg->ppl_window >= cfg->n_tokens)
    return obc_fail(OBC_EINVAL,
                    "dynamic: --tokens %zu, --chunk %zu, --ppl-window %zu (expected "
                    "tokens >= 2, chunk >= 1, 1 <= window < tokens)",
                    cfg->n_tokens, cfg->chunk, cfg->ppl_window);
  if (model->config.context_length && cfg->n_tokens > model->config.context_length)
    return obc_fail(OBC_EINVAL, "dynamic: --tokens %zu beyond the model's context of %zu",
                    cfg->n_tokens, model->config.context_length);
  for (size_t b = 0; b < cfg->n_budgets; b++)
    if (cfg->budgets[b] <= cfg->sinks + recent_of(cfg, cfg->budgets[b]) ||
        cfg->budgets[b] >= cfg->n_tokens)
      return obc_fail(OBC_EINVAL,
                      "dynamic: budget %zu (expected more than sinks + recent = %zu "
                      "and fewer than --tokens %zu)",
                      cfg->budgets[b], cfg->sinks + recent_of(cfg, cfg->budgets[b]), cfg->n_tokens);
  int32_t *tokens = NULL;
  int rc = text_tokens(model, cfg->text, cfg->max_text_bytes, cfg->n_tokens, &tokens);
  if (rc) return rc;
  size_t n_results = 1 + cfg->n_scores * cfg->n_budgets;
  DynResult *results = obc_calloc(n_results, sizeof *results, "dynamic results");
  if (!results) rc = OBC_ENOMEM;
  for (size_t i = 0; i < n_results && !rc; i++) {
    DynScore kind = i == 0 ? DYN_FULL : kinds[(i - 1) / cfg->n_budgets];
    results[i].score = i == 0 ? "full" : cfg->scores[(i - 1) / cfg->n_budgets];
    results[i].budget = i == 0 ? 0 : cfg->budgets[(i - 1) % cfg->n_budgets];
    results[i].nll = obc_malloc((cfg->n_tokens - 1) * sizeof(double), "token losses");
    if (!results[i].nll) {
      rc = OBC_ENOMEM;
      break;
    }
    double t0 = obc_now_seconds();
    rc = run_policy(model, cfg, kind, results[i].budget, tokens, results[i].nll, NULL);
    if (!rc && isatty(STDERR_FILENO))
      fprintf(stderr, "dynamic: %-9s budget %5zu: ppl %.3f (%.0f s)\n", results[i].score,
              results[i].budget, window_ppl(results[i].nll, 0, cfg->n_tokens - 1),
              obc_now_seconds() - t0);
  }
  if (!rc) rc = write_outputs(out_dir, cfg, model, results, n_results, command_line);
  if (!rc) {
    print_table(cfg, results, n_results);
    printf("-> %s/dynamic.csv\n", out_dir);
  }
  for (size_t i = 0; results && i < n_results; i++) free(results[i].nll);
  free(results);
  free(tokens);
  return rc;
}

int evict_dynamic_scores(const Model *model, const int32_t *tokens, size_t n, const char *score,
                         size_t chunk, double *scores) {
  DynScore kind = DYN_ATTN;
  int rc = dyn_score_from_name(score, &kind);
  if (rc) return rc;
  EvictDynamicConfig cfg;
  evict_dynamic_config_default(&cfg);
  cfg.n_tokens = n;
  cfg.chunk = chunk;
  double *nll = obc_malloc(n * sizeof *nll, "token losses");
  if (!nll) return OBC_ENOMEM;
  /* budget n: nothing is ever evicted; the first block is the chunk itself */
  rc = run_policy(model, &cfg, kind, n, tokens, nll, scores);
  free(nll);
  return rc;
}
