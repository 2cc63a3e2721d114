/* Model replay: loads the trace's prompt K/V into a runtime once, checks the
 * model against the trace, and replays kept sets (replay/model_replay.h).
 * Between replays only the eviction marks change; decode rows written after
 * the prompt are simply overwritten by the next replay. A batched replay
 * (runtime/batch.h) reads the same prompt rows and keeps every sequence's
 * own rows (a re-run tail's, then its decode's) and marks in the batch;
 * both paths record each step with the same code (observe_step). */
#include "replay/model_replay.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_match.h"
#include "common/obc_time.h"
#include "replay/replay_metrics.h"
#include "runtime/batch.h"
#include "runtime/generate.h"
#include "runtime/runtime.h"

/* A first decode step that differs more than this from the trace's logits
 * (relative to their largest magnitude) is another model: same-file replays
 * agree to ~1e-6, while a different quantisation or RoPE layout is off by
 * far more than a percent. */
#define REPLAY_MATCH_TOLERANCE 1e-2
/* With bf16 weights on the GPU ("cuda-bf16") the logits themselves move by up
 * to 5e-2 of their largest magnitude from the fp32 ones (the bound
 * tests/gpu/gpu_runtime.c checks): that device gets this looser bound. */
#define REPLAY_MATCH_TOLERANCE_BF16 5e-2
#define REPLAY_MAX_PIECES 64

struct Replayer {
  const Model *model;
  TraceReader *reader;
  Runtime *runtime;
  size_t n_prompt, n_steps, vocab;
  bool on_cpu;                              /* batched replay needs the CPU runtime */
  float *logits_full;                       /* (n_steps, vocab) the trace's */
  float *logits;                            /* (vocab) scratch */
  double *full_logp, *full_prob;            /* (vocab) log_softmax of a step's full logits */
  int32_t *full_tokens;                     /* (n_steps + 1) g0 and the full cache's next tokens */
  char needle[256];                         /* the needle's value, "" when unknown */
  char value_pieces[REPLAY_MAX_PIECES][32]; /* the value's tokens as text, trimmed */
  size_t n_value_pieces;
  char full_answer[4096];
  int full_needle_found;
  /* The agnostic re-run: prompt positions [tail_begin, n_prompt) (the
   * question's span on; n_prompt without one) as captured, to restore them
   * after a re-run overwrote them, and the full cache's logits of the re-run's
   * last position (the reference of kl_prefill). */
  size_t tail_begin;
  float *tail_k, *tail_v; /* (n_layers, n_kv_heads, n_prompt - tail_begin, head_dim) */
  bool tail_rerun;        /* the cache's tail rows are a re-run's, not the captured ones */
  float *prefill_full;    /* (vocab) */
  bool keep_logits;
  bool free_only;     /* no teacher-forced run (replay_model_free_running_only) */
  float *kept_logits; /* (n_steps + 1, vocab) of the last replay_model_run */
  size_t kept_rows;
};

static int check_model(const Model *model, const TraceMeta *meta, const char *trace) {
  const ModelConfig *c = &model->config;
  const TraceModel *m = &meta->model;
  /* obcache synth writes architecture "synthetic": no model captured it */
  bool synthetic = !strcmp(m->architecture, "synthetic");
  const char *hint = synthetic ? "a synthetic trace (obcache synth) has no model to replay with; "
                                 "replay it with --offline"
                               : "--model the file that captured it";
  if (c->n_layers != m->n_layers || c->n_heads != m->n_heads || c->n_kv_heads != m->n_kv_heads ||
      c->head_dim != m->head_dim || c->vocab_size != m->vocab_size)
    return obc_fail(OBC_EINVAL,
                    "%s: the model %s does not match the trace (expected %zu layers, "
                    "%zu heads, %zu KV heads, head dim %zu, vocab %zu as in the trace of %s; found "
                    "%zu, %zu, %zu, %zu, %zu; hint: %s)",
                    trace, model->path, m->n_layers, m->n_heads, m->n_kv_heads, m->head_dim,
                    m->vocab_size, m->name, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
                    c->vocab_size, hint);
  const char *layout = c->rope_interleaved ? "interleaved" : "half";
  if (m->rope_layout[0] && strcmp(m->rope_layout, "none") && strcmp(m->rope_layout, layout))
    return obc_fail(
        OBC_EINVAL,
        "%s: the trace's keys use the %s RoPE layout, the model %s the %s one "
        "(hint: replay with the same kind of file, GGUF or Hugging Face, that captured it)",
        trace, m->rope_layout, model->path, layout);
  if (!meta->has_logits || !meta->tokens)
    return obc_fail(OBC_EINVAL,
                    "%s: no decode logits or tokens stored (model replay compares "
                    "with them; hint: %s)",
                    trace, synthetic ? hint : "a trace of obcache capture");
  return OBC_OK;
}

/* One token's text without spaces and periods ("" for such a token), so
 * " 9" in the prompt and "9" in an answer compare equal. */
static int token_piece(const Tokenizer *tokenizer, int32_t id, char *out, size_t size) {
  char *text = NULL;
  int rc = tokenizer_decode(tokenizer, &id, 1, &text);
  if (rc) return rc;
  size_t n = 0;
  for (const char *c = text; *c && n + 1 < size; c++)
    if (!isspace((unsigned char)*c) && *c != '.') out[n++] = *c;
  out[n] = '\0';
  free(text);
  return OBC_OK;
}

/* The trace's "needle_value" span when it names prompt tokens that the
 * trace holds, else NULL (no needle to look for). */
static const TraceSpan *needle_value_span(const TraceMeta *meta) {
  const TraceSpan *span = trace_meta_find_span(meta, "needle_value");
  if (!span || !meta->tokens || span->begin < 0 || span->end <= span->begin ||
      span->end > (int64_t)meta->n_prompt)
    return NULL;
  return span;
}

/* The needle value's tokens as trimmed pieces (empty ones dropped). */
static int value_pieces(Replayer *r, const TraceMeta *meta) {
  const TraceSpan *span = needle_value_span(meta);
  r->n_value_pieces = 0;
  if (!r->needle[0] || !span || !r->model->tokenizer) return OBC_OK;
  for (int64_t p = span->begin; p < span->end && r->n_value_pieces < REPLAY_MAX_PIECES; p++) {
    char *piece = r->value_pieces[r->n_value_pieces];
    int rc = token_piece(r->model->tokenizer, meta->tokens[p], piece, sizeof r->value_pieces[0]);
    if (rc) return rc;
    if (piece[0]) r->n_value_pieces++;
  }
  return OBC_OK;
}

/* needle_prefix, needle_chars and needle_tokens of an answer: tokens (n) are
 * g0 and the predictions, up to the first stop token. */
static int needle_metrics(const Replayer *r, const int32_t *tokens, size_t n, ReplayAnswer *out) {
  out->needle_chars = strlen(r->needle);
  out->needle_prefix = replay_needle_prefix(out->answer, r->needle);
  out->needle_tokens = NAN;
  if (r->n_value_pieces == 0) return OBC_OK;
  char(*pieces)[32] = malloc((n ? n : 1) * sizeof *pieces);
  const char **answer = malloc((n ? n : 1) * sizeof *answer);
  const char *value[REPLAY_MAX_PIECES];
  int rc = pieces && answer ? OBC_OK : OBC_ENOMEM;
  size_t m = 0;
  for (size_t t = 0; t < n && !rc; t++) {
    if (tokenizer_is_stop(r->model->tokenizer, tokens[t])) break;
    rc = token_piece(r->model->tokenizer, tokens[t], pieces[m], sizeof pieces[0]);
    if (!rc && pieces[m][0]) answer[m] = pieces[m], m++;
  }
  for (size_t i = 0; i < r->n_value_pieces; i++) value[i] = r->value_pieces[i];
  if (!rc) out->needle_tokens = replay_piece_share(value, r->n_value_pieces, answer, m);
  free(pieces);
  free(answer);
  return rc;
}

/* The needle's value: the tokens of the "needle_value" span, decoded and
 * trimmed. */
static int needle_value(const Model *model, const TraceMeta *meta, char *out, size_t size) {
  out[0] = '\0';
  const TraceSpan *span = needle_value_span(meta);
  if (!span || !model->tokenizer) return OBC_OK;
  char *text = NULL;
  int rc = tokenizer_decode(model->tokenizer, meta->tokens + span->begin,
                            (size_t)(span->end - span->begin), &text);
  if (rc) return rc;
  const char *b = text;
  while (*b && isspace((unsigned char)*b)) b++;
  size_t n = strlen(b);
  while (n > 0 && (isspace((unsigned char)b[n - 1]) || b[n - 1] == '.')) n--;
  snprintf(out, size, "%.*s", (int)n, b);
  free(text);
  return OBC_OK;
}

/* log p and p of the softmax of logits (the full cache's, the reference of
 * the KL), once per step for every replayed set. */
static void log_softmax(const float *logits, size_t n, double *logp, double *prob) {
  double max = -HUGE_VAL, sum = 0.0;
  for (size_t i = 0; i < n; i++) max = logits[i] > max ? logits[i] : max;
  for (size_t i = 0; i < n; i++) sum += exp(logits[i] - max);
  double lse = max + log(sum);
  for (size_t i = 0; i < n; i++) {
    logp[i] = logits[i] - lse;
    prob[i] = exp(logp[i]);
  }
}

/* KL(p || q), p given by log_softmax, q by its logits. */
static double kl_divergence(const double *logp, const double *prob, const float *q_logits,
                            size_t n) {
  double q_max = -HUGE_VAL, q_sum = 0.0;
  for (size_t i = 0; i < n; i++) q_max = q_logits[i] > q_max ? q_logits[i] : q_max;
  for (size_t i = 0; i < n; i++) q_sum += exp(q_logits[i] - q_max);
  double q_lse = q_max + log(q_sum), kl = 0.0;
  for (size_t i = 0; i < n; i++) kl += prob[i] * (logp[i] - (q_logits[i] - q_lse));
  return kl > 0.0 ? kl : 0.0;
}

static double relative_diff(const float *a, const float *ref, size_t n) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)a[i] - ref[i]));
    scale = fmax(scale, fabs((double)ref[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

static int load_cache(Replayer *r, const TraceMeta *meta) {
  RuntimeCache *cache = runtime_cache(r->runtime);
  size_t d = meta->model.head_dim, s = meta->n_prompt;
  float *K = trace_alloc(r->reader, meta->n_positions * d, sizeof *K, "K of one KV head");
  float *V =
      K ? trace_alloc(r->reader, meta->n_positions * d, sizeof *V, "V of one KV head") : NULL;
  int rc = K && V ? OBC_OK : OBC_ENOMEM;
  for (size_t l = 0; l < meta->model.n_layers && !rc; l++)
    for (size_t g = 0; g < meta->model.n_kv_heads && !rc; g++) {
      if ((rc = trace_read_kv(r->reader, l, g, K, V))) break;
      memcpy(runtime_cache_k(cache, l, g), K, s * d * sizeof *K);
      memcpy(runtime_cache_v(cache, l, g), V, s * d * sizeof *V);
    }
  free(K);
  free(V);
  if (!rc) rc = runtime_set_position(r->runtime, s);
  return rc;
}

/* Copies the captured tail rows [tail_begin, n_prompt) between the cache
 * and r->tail_k/tail_v: to_cache restores them (and declares the prompt
 * valid again, so that a device copy is refreshed). */
static int copy_tail(Replayer *r, bool to_cache) {
  RuntimeCache *cache = runtime_cache(r->runtime);
  size_t d = cache->head_dim, rows = r->n_prompt - r->tail_begin;
  for (size_t l = 0; l < cache->n_layers; l++)
    for (size_t g = 0; g < cache->n_kv_heads; g++) {
      float *k = runtime_cache_k(cache, l, g) + r->tail_begin * d;
      float *v = runtime_cache_v(cache, l, g) + r->tail_begin * d;
      float *tk = r->tail_k + (l * cache->n_kv_heads + g) * rows * d;
      float *tv = r->tail_v + (l * cache->n_kv_heads + g) * rows * d;
      memcpy(to_cache ? k : tk, to_cache ? tk : k, rows * d * sizeof *k);
      memcpy(to_cache ? v : tv, to_cache ? tv : v, rows * d * sizeof *v);
    }
  if (!to_cache) return OBC_OK;
  r->tail_rerun = false;
  return runtime_set_position(r->runtime, r->n_prompt);
}

/* Runs the prompt tokens [begin, n_prompt) at their positions against the
 * cache's rows [0, begin) (with the current eviction marks) into logits
 * (vocab): the last position's. */
static int rerun_tail(Replayer *r, size_t begin, float *logits) {
  const TraceMeta *meta = trace_meta(r->reader);
  int rc = runtime_rewind(r->runtime, begin);
  r->tail_rerun = true;
  if (!rc)
    rc = runtime_forward(r->runtime, meta->tokens + begin, r->n_prompt - begin, RUNTIME_LOGITS_LAST,
                         logits, NULL);
  return rc;
}

/* The tail of an agnostic re-run (from the "question" span's begin, as
 * evict_policy_candidates places it), saved as captured, and its re-run over
 * the full cache: the first answer token's reference logits. */
static int save_tail(Replayer *r, const TraceMeta *meta) {
  const TraceSpan *question = trace_meta_find_span(meta, "question");
  r->tail_begin = r->n_prompt;
  if (!question || question->begin <= 0 || question->begin >= (int64_t)r->n_prompt) return OBC_OK;
  r->tail_begin = (size_t)question->begin;
  size_t cells = meta->model.n_layers * meta->model.n_kv_heads * (r->n_prompt - r->tail_begin) *
                 meta->model.head_dim;
  r->tail_k = obc_malloc(cells * sizeof(float), "captured question K");
  r->tail_v = obc_malloc(cells * sizeof(float), "captured question V");
  r->prefill_full = obc_malloc(r->vocab * sizeof(float), "full-cache first-token logits");
  if (!r->tail_k || !r->tail_v || !r->prefill_full) return OBC_ENOMEM;
  int rc = copy_tail(r, false);
  if (!rc) rc = rerun_tail(r, r->tail_begin, r->prefill_full);
  if (!rc) rc = copy_tail(r, true);
  return rc;
}

void replay_model_close(Replayer *r) {
  if (!r) return;
  runtime_free(r->runtime);
  free(r->logits_full);
  free(r->logits);
  free(r->full_logp);
  free(r->full_prob);
  free(r->full_tokens);
  free(r->tail_k);
  free(r->tail_v);
  free(r->prefill_full);
  free(r->kept_logits);
  free(r);
}

int replay_model_open(const Model *model, TraceReader *reader, size_t steps, size_t threads,
                      const char *device, Replayer **out) {
  *out = NULL;
  const TraceMeta *meta = trace_meta(reader);
  const char *trace = trace_path(reader);
  int rc = check_model(model, meta, trace);
  if (rc) return rc;
  if (meta->n_decode == 0)
    return obc_fail(OBC_EINVAL, "%s: no decode steps captured (model replay needs them)", trace);
  if (steps == 0 || steps > meta->n_decode) steps = meta->n_decode;
  if (steps > REPLAY_MAX_STEPS) steps = REPLAY_MAX_STEPS;
  Replayer *r = obc_calloc(1, sizeof *r, "replayer");
  if (!r) return OBC_ENOMEM;
  r->model = model;
  r->reader = reader;
  r->n_prompt = meta->n_prompt;
  r->n_steps = steps;
  r->vocab = model->config.vocab_size;
  r->logits_full = trace_alloc(reader, meta->n_decode * r->vocab, sizeof(float), "/logits");
  r->logits = obc_malloc(r->vocab * sizeof(float), "replay logits");
  r->full_logp = obc_malloc(r->vocab * sizeof(double), "replay log-probabilities");
  r->full_prob = obc_malloc(r->vocab * sizeof(double), "replay probabilities");
  r->full_tokens = obc_malloc((steps + 1) * sizeof(int32_t), "full-cache tokens");
  if (!r->logits_full || !r->logits || !r->full_logp || !r->full_prob || !r->full_tokens)
    rc = OBC_ENOMEM;
  if (!rc) rc = trace_read_logits(reader, r->logits_full);
  RuntimeOptions options = {
      .max_context = meta->n_prompt + steps, .threads = threads, .backend = device};
  r->on_cpu = !device || !strcmp(device, "cpu");
  if (!rc) rc = runtime_create(model, &options, &r->runtime);
  if (!rc) rc = load_cache(r, meta);
  if (!rc) {
    r->full_tokens[0] = meta->tokens[meta->n_prompt];
    for (size_t t = 0; t < steps; t++)
      r->full_tokens[t + 1] = (int32_t)generate_argmax(r->logits_full + t * r->vocab, r->vocab);
    rc = needle_value(model, meta, r->needle, sizeof r->needle);
  }
  if (!rc) rc = value_pieces(r, meta);
  if (!rc)
    rc = generate_answer_text(model->tokenizer, r->full_tokens, steps + 1, r->full_answer,
                              sizeof r->full_answer);
  r->full_needle_found = obc_match_needle(r->full_answer, (const char *[]){r->needle}, 1);
  /* The model must reproduce the first decode step with the full cache. */
  if (!rc)
    rc = runtime_forward(r->runtime, r->full_tokens, 1, RUNTIME_LOGITS_LAST, r->logits, NULL);
  if (!rc) {
    double diff = relative_diff(r->logits, r->logits_full, r->vocab);
    double tolerance = device && !strcmp(device, "cuda-bf16") ? REPLAY_MATCH_TOLERANCE_BF16
                                                              : REPLAY_MATCH_TOLERANCE;
    if (diff > tolerance)
      rc = obc_fail(OBC_EINVAL,
                    "%s: the model %s does not reproduce the trace's first decode "
                    "step with the full cache (relative logit difference %.3g, expected <= %g; "
                    "hint: another quantisation, weights or RoPE layout than the capture's)",
                    trace, model->path, diff, tolerance);
  }
  if (!rc) rc = runtime_rewind(r->runtime, r->n_prompt); /* keeps the loaded rows */
  if (!rc) rc = save_tail(r, meta);
  if (rc) {
    replay_model_close(r);
    return rc;
  }
  *out = r;
  return OBC_OK;
}

const char *replay_model_full_answer(const Replayer *r, int *needle_found) {
  if (needle_found) *needle_found = r->full_needle_found;
  return r->full_answer;
}

int32_t replay_model_full_token(const Replayer *r, size_t t) {
  return t <= r->n_steps ? r->full_tokens[t] : -1;
}

static int apply_marks(Replayer *r, const EvictKeepSet *keep) {
  runtime_clear_evictions(r->runtime);
  for (size_t l = 0; l < keep->n_layers; l++)
    for (size_t g = 0; g < keep->n_kv_heads; g++) {
      const unsigned char *k = keep->keep + (l * keep->n_kv_heads + g) * keep->n_prompt;
      int rc = runtime_set_kept(r->runtime, l, g, k, keep->n_prompt);
      if (rc) return rc;
    }
  return OBC_OK;
}

/* The two decodings of a kept set: free-running (greedy, each step fed the
 * previous prediction) and teacher-forced (each step fed the full cache's
 * token). */
typedef enum { REPLAY_FREE_RUNNING, REPLAY_TEACHER_FORCED } ReplayDecoding;

/* Records decode step t of a replay from its logits (vocab): teacher-forced,
 * the KL against the full cache (r->full_logp/full_prob: step t's
 * log_softmax), returning the full cache's next token; free-running, the
 * prediction (returned: the next token), its top-2 margin and agreement. */
static int32_t observe_step(const Replayer *r, ReplayDecoding decoding, size_t t,
                            const float *logits, ReplayAnswer *out, size_t *agree) {
  bool forced = decoding == REPLAY_TEACHER_FORCED;
  const float *full = r->logits_full + t * r->vocab;
  for (size_t i = 0; i < r->vocab; i++) out->logit_scale = fmax(out->logit_scale, fabs(logits[i]));
  if (forced) {
    double kl = kl_divergence(r->full_logp, r->full_prob, logits, r->vocab);
    out->kl_forced[t] = kl;
    out->kl_forced_mean += kl / r->n_steps;
    out->logits_rel_diff = fmax(out->logits_rel_diff, relative_diff(logits, full, r->vocab));
    return r->full_tokens[t + 1];
  }
  int32_t predicted = (int32_t)generate_argmax(logits, r->vocab);
  float second = -INFINITY;
  for (size_t i = 0; i < r->vocab; i++)
    if (i != (size_t)predicted && logits[i] > second) second = logits[i];
  out->margin[t] = (double)logits[predicted] - second;
  out->tokens[t] = predicted;
  *agree += predicted == r->full_tokens[t + 1];
  return predicted;
}

/* The free-running summary after the last step (out->n_steps of them). */
static void finish_free_running(const Replayer *r, size_t agree, ReplayAnswer *out) {
  out->agreement = out->n_steps ? (double)agree / out->n_steps : NAN;
  out->first_divergence = replay_first_divergence(r->full_tokens + 1, out->tokens, out->n_steps);
}

/* Whether a free-running-only replay ends after predicting token. */
static bool ends_answer(const Replayer *r, int32_t token) {
  return r->free_only && r->model->tokenizer && tokenizer_is_stop(r->model->tokenizer, token);
}

/* T steps from position s; teacher-forced: feed the full-cache tokens from
 * g0, free-running: the previous prediction from out->first_token.
 * Teacher-forced logits go to kept_logits when kept (row `row0` + t). */
static int decode(Replayer *r, ReplayDecoding decoding, size_t row0, ReplayAnswer *out) {
  bool forced = decoding == REPLAY_TEACHER_FORCED;
  int rc = runtime_rewind(r->runtime, r->n_prompt);
  int32_t token = forced ? r->full_tokens[0] : out->first_token;
  size_t agree = 0;
  if (!forced && ends_answer(r, token)) out->n_steps = 0;
  for (size_t t = 0; t < out->n_steps && !rc; t++) {
    rc = runtime_forward(r->runtime, &token, 1, RUNTIME_LOGITS_LAST, r->logits, NULL);
    if (!rc && forced)
      log_softmax(r->logits_full + t * r->vocab, r->vocab, r->full_logp, r->full_prob);
    if (!rc && forced && r->kept_logits)
      memcpy(r->kept_logits + (row0 + t) * r->vocab, r->logits, r->vocab * sizeof *r->logits);
    if (!rc) token = observe_step(r, decoding, t, r->logits, out, &agree);
    if (!rc && !forced && ends_answer(r, token)) out->n_steps = t + 1;
  }
  if (!forced) finish_free_running(r, agree, out);
  return rc;
}

/* The answer text and needle metrics of a replayed free-running run. */
static int finish_replay(const Replayer *r, ReplayAnswer *out) {
  int32_t answer[REPLAY_MAX_STEPS + 1];
  answer[0] = out->first_token;
  memcpy(answer + 1, out->tokens, out->n_steps * sizeof *answer);
  int rc = generate_answer_text(r->model->tokenizer, answer, out->n_steps + 1, out->answer,
                                sizeof out->answer);
  if (!rc) rc = needle_metrics(r, answer, out->n_steps + 1, out);
  out->needle_found = obc_match_needle(out->answer, (const char *[]){r->needle}, 1);
  return rc;
}

static int check_keep(const Replayer *r, const EvictKeepSet *keep) {
  if (keep->n_prompt != r->n_prompt)
    return obc_fail(OBC_EINVAL, "replay: the kept set covers %zu prompt positions (expected %zu)",
                    keep->n_prompt, r->n_prompt);
  return OBC_OK;
}

int replay_model_keep_logits(Replayer *r, bool on) {
  r->keep_logits = on;
  if (on && !r->kept_logits)
    r->kept_logits = obc_malloc((r->n_steps + 1) * r->vocab * sizeof(float), "kept logits");
  return !on || r->kept_logits ? OBC_OK : OBC_ENOMEM;
}

const float *replay_model_logits(const Replayer *r, size_t *rows, size_t *vocab) {
  *rows = r->keep_logits ? r->kept_rows : 0;
  *vocab = r->vocab;
  return r->keep_logits ? r->kept_logits : NULL;
}

/* Whether the kept set's replay re-runs the prompt after its candidates:
 * agnostic (the question and what follows it) or aware (what follows the
 * question), with prompt positions after the candidates. */
static bool reruns_tail(const EvictKeepSet *keep) {
  return evict_protocol_reruns_tail(keep->policy.protocol) && keep->n_candidates < keep->n_prompt;
}

/* The first answer token of a re-run from position start, from the logits
 * of its last position: its argmax and top-2 margin, and kl_prefill when the
 * reference re-ran the same tail (start == tail_begin). */
static void first_answer(Replayer *r, size_t start, const float *logits, ReplayAnswer *out) {
  out->first_token = (int32_t)generate_argmax(logits, r->vocab);
  float second = -INFINITY;
  for (size_t i = 0; i < r->vocab; i++)
    if (i != (size_t)out->first_token && logits[i] > second) second = logits[i];
  out->first_margin = (double)logits[out->first_token] - second;
  out->rerun_tokens = r->n_prompt - start;
  if (start == r->tail_begin) {
    log_softmax(r->prefill_full, r->vocab, r->full_logp, r->full_prob);
    out->kl_prefill = kl_divergence(r->full_logp, r->full_prob, logits, r->vocab);
  }
}

/* A kept set whose candidates end before the question cannot re-run it. */
static int check_rerun(const Replayer *r, const EvictKeepSet *keep) {
  if (!reruns_tail(keep) || keep->n_candidates >= r->tail_begin) return OBC_OK;
  return obc_fail(OBC_EINVAL,
                  "replay: the kept set's candidates end at position %zu, before the "
                  "trace's question (position %zu), so the question cannot be re-run",
                  keep->n_candidates, r->tail_begin);
}

/* Before the decode steps: under a re-run the tail re-run against the
 * evicted cache (its last logits into row 0 of kept_logits); else the
 * captured tail rows, restored after an earlier re-run. */
static int prepare_tail(Replayer *r, const EvictKeepSet *keep, ReplayAnswer *out) {
  out->first_token = r->full_tokens[0];
  out->first_margin = NAN;
  out->kl_prefill = NAN;
  if (!reruns_tail(keep)) return r->tail_rerun ? copy_tail(r, true) : OBC_OK;
  int rc = check_rerun(r, keep);
  if (rc) return rc;
  double start = obc_now_seconds();
  /* A query-aware tail begins after the question: the question's rows must
   * be the captured ones, not an earlier agnostic re-run's. */
  if (r->tail_rerun && keep->n_candidates > r->tail_begin) rc = copy_tail(r, true);
  if (!rc) rc = rerun_tail(r, keep->n_candidates, r->logits);
  out->rerun_seconds = obc_now_seconds() - start;
  if (rc) return rc;
  first_answer(r, keep->n_candidates, r->logits, out);
  if (r->kept_logits) memcpy(r->kept_logits, r->logits, r->vocab * sizeof *r->logits);
  return OBC_OK;
}

int replay_model_free_running_only(Replayer *r, bool on) {
  if (on && r->keep_logits)
    return obc_fail(OBC_EINVAL, "replay: kept logits are the teacher-forced run's");
  r->free_only = on;
  return OBC_OK;
}

/* The teacher-forced fields of a replay without that run. */
static void no_forced_run(ReplayAnswer *out) {
  for (size_t t = 0; t < out->n_steps; t++) out->kl_forced[t] = NAN;
  out->kl_forced_mean = NAN;
  out->logits_rel_diff = NAN;
}

int replay_model_run(Replayer *r, const EvictKeepSet *keep, ReplayAnswer *out) {
  memset(out, 0, sizeof *out);
  out->n_steps = r->n_steps;
  int rc = check_keep(r, keep);
  if (!rc) rc = apply_marks(r, keep);
  if (!rc) rc = prepare_tail(r, keep, out);
  size_t row0 = reruns_tail(keep) ? 1 : 0;
  if (!rc) rc = decode(r, REPLAY_FREE_RUNNING, row0, out);
  if (!rc && !r->free_only) rc = decode(r, REPLAY_TEACHER_FORCED, row0, out);
  if (!rc && r->free_only) no_forced_run(out);
  if (!rc) rc = finish_replay(r, out);
  r->kept_rows = rc ? 0 : row0 + r->n_steps;
  return rc;
}

/* Sequences per pass for max_seqs (0 = by memory) of a batch whose
 * sequences run steps tokens each. */
static size_t batch_cap(const Replayer *r, size_t max_seqs, size_t steps) {
  if (max_seqs == 0) {
    size_t per = runtime_batch_bytes_per_seq(r->runtime, steps);
    max_seqs = REPLAY_BATCH_BYTES / (per ? per : 1);
  }
  return max_seqs < 2 ? 2 : max_seqs / 2 * 2;
}

size_t replay_model_batch_seqs(const Replayer *r, size_t max_seqs) {
  return batch_cap(r, max_seqs, r->n_steps);
}

/* Sequences of one kept set in a batch: free-running, and teacher-forced
 * unless the replayer runs free-running only. */
static size_t seqs_per_set(const Replayer *r) { return r->free_only ? 1 : 2; }

/* Where the sequences of a kept set begin their own rows: after their
 * candidates when they re-run what follows them, else after the prompt. */
static size_t own_rows_begin(const Replayer *r, const EvictKeepSet *keep) {
  return reruns_tail(keep) ? keep->n_candidates : r->n_prompt;
}

/* Sets m kept sets into batch, keeps[order[j]] for j < m: sequence per j
 * free-running, per j + 1 teacher-forced (per = 2), all with the set's
 * marks over the shared rows [0, shared). */
static int batch_marks(RuntimeBatch *batch, const EvictKeepSet *keeps, const size_t *order,
                       size_t m, size_t per, size_t shared) {
  int rc = runtime_batch_reset(batch, per * m);
  for (size_t j = 0; j < m && !rc; j++) {
    const EvictKeepSet *keep = &keeps[order[j]];
    size_t n = keep->n_prompt < shared ? keep->n_prompt : shared;
    for (size_t l = 0; l < keep->n_layers && !rc; l++)
      for (size_t g = 0; g < keep->n_kv_heads && !rc; g++) {
        const unsigned char *k = keep->keep + (l * keep->n_kv_heads + g) * keep->n_prompt;
        for (size_t q = 0; q < per && !rc; q++)
          rc = runtime_batch_set_kept(batch, per * j + q, l, g, k, n);
      }
  }
  return rc;
}

/* The re-run of prompt positions [shared, n_prompt) in every sequence of
 * the batch, one token per call, each over its own marks; the last call's
 * logits give each of the m sets its first answer token. */
static int batch_rerun(Replayer *r, RuntimeBatch *batch, const size_t *order, size_t m,
                       size_t shared, ReplayAnswer *outs, int32_t *tokens, float *logits) {
  const TraceMeta *meta = trace_meta(r->reader);
  size_t per = seqs_per_set(r);
  double start = obc_now_seconds();
  int rc = OBC_OK;
  for (size_t i = shared; i < r->n_prompt && !rc; i++) {
    for (size_t b = 0; b < per * m; b++) tokens[b] = meta->tokens[i];
    rc = runtime_batch_forward(batch, tokens, i + 1 == r->n_prompt ? logits : NULL);
  }
  double seconds = obc_now_seconds() - start;
  for (size_t j = 0; j < m && !rc; j++) {
    first_answer(r, shared, logits + per * j * r->vocab, &outs[order[j]]);
    outs[order[j]].rerun_seconds = seconds;
  }
  return rc;
}

/* One pass: the m kept sets keeps[order[j]], per m sequences, over the
 * shared rows [0, shared): the re-run of the rest of the prompt, if any,
 * then every decode step. */
static int batch_pass(Replayer *r, RuntimeBatch *batch, const EvictKeepSet *keeps,
                      const size_t *order, size_t m, size_t shared, ReplayAnswer *outs,
                      int32_t *tokens, size_t *agree, float *logits) {
  size_t per = seqs_per_set(r);
  int rc = batch_marks(batch, keeps, order, m, per, shared);
  for (size_t j = 0; j < m; j++) {
    memset(&outs[order[j]], 0, sizeof outs[order[j]]);
    outs[order[j]].n_steps = r->n_steps;
    outs[order[j]].first_token = r->full_tokens[0];
    outs[order[j]].first_margin = NAN;
    outs[order[j]].kl_prefill = NAN;
    agree[j] = 0;
  }
  if (!rc && shared < r->n_prompt)
    rc = batch_rerun(r, batch, order, m, shared, outs, tokens, logits);
  size_t running = m; /* sets whose answer has not ended */
  for (size_t j = 0; j < m; j++) {
    ReplayAnswer *out = &outs[order[j]];
    tokens[per * j] = out->first_token;
    if (per == 2) tokens[per * j + 1] = r->full_tokens[0];
    if (ends_answer(r, out->first_token)) out->n_steps = 0, running--;
  }
  for (size_t t = 0; t < r->n_steps && running && !rc; t++) {
    if ((rc = runtime_batch_forward(batch, tokens, logits))) break;
    log_softmax(r->logits_full + t * r->vocab, r->vocab, r->full_logp, r->full_prob);
    /* Sets are independent: each writes only its own result and tokens. */
#pragma omp parallel for schedule(dynamic, 1) reduction(- : running)
    for (size_t j = 0; j < m; j++) {
      ReplayAnswer *out = &outs[order[j]];
      if (t >= out->n_steps) continue; /* its answer ended: fed on, not observed */
      tokens[per * j] =
          observe_step(r, REPLAY_FREE_RUNNING, t, logits + per * j * r->vocab, out, &agree[j]);
      if (ends_answer(r, tokens[per * j])) out->n_steps = t + 1, running--;
      if (per == 2)
        tokens[per * j + 1] =
            observe_step(r, REPLAY_TEACHER_FORCED, t, logits + (per * j + 1) * r->vocab, out, NULL);
    }
  }
  for (size_t j = 0; j < m && !rc; j++) {
    finish_free_running(r, agree[j], &outs[order[j]]);
    if (per == 1) no_forced_run(&outs[order[j]]);
    rc = finish_replay(r, &outs[order[j]]);
  }
  return rc;
}

typedef struct {
  size_t kept, index;
} KeptCount;

static int kept_order(const void *a, const void *b) {
  const KeptCount *x = a, *y = b;
  if (x->kept != y->kept) return x->kept < y->kept ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* The sets by their number of kept positions (then index): a pass, and each
 * attention block within it, holds sets of similar budgets, and the batch
 * leaves out the keys all sequences of a block dropped. */
static size_t *order_by_kept(const EvictKeepSet *keeps, size_t n) {
  KeptCount *counts = obc_malloc(n * sizeof *counts, "replay order");
  size_t *order = obc_malloc(n * sizeof *order, "replay order");
  if (!counts || !order) {
    free(counts);
    free(order);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    size_t cells = keeps[i].n_layers * keeps[i].n_kv_heads * keeps[i].n_prompt, kept = 0;
    for (size_t c = 0; c < cells; c++) kept += keeps[i].keep[c] != 0;
    counts[i] = (KeptCount){kept, i};
  }
  qsort(counts, n, sizeof *counts, kept_order);
  for (size_t i = 0; i < n; i++) order[i] = counts[i].index;
  free(counts);
  return order;
}

static int run_batch_sets(Replayer *r, const EvictKeepSet *keeps, size_t n, size_t max_seqs,
                          size_t shared, ReplayAnswer *outs);

int replay_model_run_batch(Replayer *r, const EvictKeepSet *keeps, size_t n, size_t max_seqs,
                           ReplayAnswer *outs) {
  int rc = OBC_OK;
  for (size_t i = 0; i < n && !rc; i++) rc = check_keep(r, &keeps[i]);
  for (size_t i = 0; i < n && !rc; i++) rc = check_rerun(r, &keeps[i]);
  if (rc || n == 0) return rc;
  if (!r->on_cpu) { /* the batched runtime is the CPU's */
    for (size_t i = 0; i < n && !rc; i++) rc = replay_model_run(r, &keeps[i], &outs[i]);
    return rc;
  }
  /* One batched replay per group of sets whose own rows begin at the same
   * position, the groups in the order of their first set. */
  EvictKeepSet *group = obc_malloc(n * sizeof *group, "batched kept sets");
  ReplayAnswer *group_outs = obc_malloc(n * sizeof *group_outs, "batched results");
  bool *done = obc_calloc(n, sizeof *done, "batched kept sets");
  rc = group && group_outs && done ? OBC_OK : OBC_ENOMEM;
  for (size_t first = 0; first < n && !rc; first++) {
    if (done[first]) continue;
    size_t shared = own_rows_begin(r, &keeps[first]), m = 0;
    for (size_t i = first; i < n; i++)
      if (!done[i] && own_rows_begin(r, &keeps[i]) == shared)
        group[m++] = keeps[i]; /* shallow: masks stay the caller's */
    rc = run_batch_sets(r, group, m, max_seqs, shared, group_outs);
    for (size_t i = first, j = 0; i < n && !rc; i++)
      if (!done[i] && own_rows_begin(r, &keeps[i]) == shared) {
        outs[i] = group_outs[j++];
        done[i] = true;
      }
  }
  free(group);
  free(group_outs);
  free(done);
  return rc;
}

/* The batched replay of n sets that share the captured prompt rows
 * [0, shared) and re-run [shared, n_prompt), if any, each on its own. */
static int run_batch_sets(Replayer *r, const EvictKeepSet *keeps, size_t n, size_t max_seqs,
                          size_t shared, ReplayAnswer *outs) {
  size_t per = seqs_per_set(r), steps = r->n_prompt - shared + r->n_steps;
  /* The batch reads the captured rows [0, shared), never an earlier
   * one-at-a-time re-run's. */
  int rc = r->tail_rerun ? copy_tail(r, true) : OBC_OK;
  if (!rc) rc = runtime_rewind(r->runtime, shared);
  if (rc) return rc;
  size_t cap = batch_cap(r, max_seqs, steps);
  if (cap > per * n) cap = per * n;
  RuntimeBatch *batch = NULL;
  rc = runtime_batch_create(r->runtime, cap, steps, &batch);
  float *logits = rc ? NULL : obc_malloc(cap * r->vocab * sizeof *logits, "batched logits");
  int32_t *tokens = rc ? NULL : obc_malloc(cap * sizeof *tokens, "batched tokens");
  size_t *agree = rc ? NULL : obc_malloc(cap / per * sizeof *agree, "batched agreement");
  size_t *order = rc ? NULL : order_by_kept(keeps, n);
  if (!rc && (!logits || !tokens || !agree || !order)) rc = OBC_ENOMEM;
  for (size_t i = 0; i < n && !rc; i += cap / per) {
    size_t m = n - i < cap / per ? n - i : cap / per;
    rc = batch_pass(r, batch, keeps, order + i, m, shared, outs, tokens, agree, logits);
  }
  free(order);
  free(logits);
  free(tokens);
  free(agree);
  runtime_batch_free(batch);
  /* The host rows are untouched: the whole captured prompt is valid again. */
  int restored = shared < r->n_prompt ? runtime_set_position(r->runtime, r->n_prompt) : OBC_OK;
  return rc ? rc : restored;
}
