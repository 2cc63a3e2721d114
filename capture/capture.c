/* Runs the model on a NIAH prompt and writes the trace. The captured rows are
 * one contiguous block of positions (the last R prompt rows, then one row per
 * decode step), so a row's index is its position minus the first one. All
 * tensors are gathered in memory while the model runs and written at the end:
 * nothing touches the disk until the trace is complete in memory, and the
 * writer's temporary name keeps an interrupted write from looking finished. */
#include "capture/capture.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture_progress.h"
#include "capture/capture_qstats.h"
#include "capture/capture_sums.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_time.h"
#include "runtime/generate.h"
#include "runtime/runtime.h"
#include "traces/trace.h"

/* What the seam callback fills, for every layer. */
typedef struct {
  size_t n_layers, n_heads, head_dim;
  size_t n_rows;      /* R + T */
  size_t n_positions; /* s + T */
  size_t first_row;   /* position of row 0 */
  float *q;           /* (n_layers, n_heads, n_rows, head_dim) */
  float *o;           /* (n_layers, n_heads, n_rows, head_dim) */
  float *lse;         /* (n_layers, n_heads, n_rows) */
  float *attn;        /* (n_layers, n_heads, n_rows, n_positions) or NULL */
  CaptureProgress *progress;
  const char *stage;
  CaptureSums *sums;         /* column sums of every prompt row, or NULL */
  const RuntimeCache *cache; /* the runtime's, for the sums' keys and values */
  CaptureQueryStats *qstats; /* pre-RoPE query statistics (with the sums), or NULL */
  RuntimeSums *device_sums;  /* sums and qstats made by the runtime's device, or NULL */
} CaptureBuffers;

/* The device sums write straight into CaptureSums and CaptureQueryStats. */
_Static_assert((int)RUNTIME_SUMS_AGNOSTIC == (int)TRACE_ROWS_AGNOSTIC &&
                   (int)RUNTIME_SUMS_ALL == (int)TRACE_ROWS_ALL &&
                   (int)RUNTIME_SUMS_VARIANTS == (int)TRACE_ROWS_VARIANTS &&
                   (int)RUNTIME_SUMS_OBC_TERMS == (int)TRACE_OBC_TERMS,
               "runtime.h's RuntimeSums layout is the trace's");

void capture_options_default(CaptureOptions *options) {
  memset(options, 0, sizeof *options);
  options->rows = 128;
  options->decode = 16;
  options->compression = 0;
  const char *place = getenv(CAPTURE_SUMS_ENV);
  options->sums_place = place && !strcmp(place, "cpu") ? CAPTURE_SUMS_HOST : CAPTURE_SUMS_DEVICE;
}

static int on_layer(void *user, const RuntimeLayerCapture *view) {
  CaptureBuffers *b = user;
  size_t hd = b->head_dim;
  assert(view->head_dim == hd && view->n_heads == b->n_heads);
  for (size_t h = 0; h < b->n_heads; h++) {
    size_t head = view->layer * b->n_heads + h;
    for (size_t r = 0; r < view->n_rows; r++) {
      if (view->row_positions[r] < b->first_row) continue; /* a row only the sums need */
      size_t row = view->row_positions[r] - b->first_row;
      assert(row < b->n_rows);
      size_t src = h * view->n_rows + r, dst = head * b->n_rows + row;
      memcpy(b->q + dst * hd, view->q + src * hd, hd * sizeof(float));
      memcpy(b->o + dst * hd, view->o + src * hd, hd * sizeof(float));
      b->lse[dst] = view->lse[src];
      if (b->attn && view->attn)
        memcpy(b->attn + dst * b->n_positions, view->attn + src * view->n_keys,
               view->n_keys * sizeof(float));
    }
  }
  bool host_sums = !b->device_sums;
  int rc = b->sums && host_sums ? capture_sums_add(b->sums, view, b->cache) : OBC_OK;
  if (!rc && b->qstats && host_sums) rc = capture_qstats_add(b->qstats, view);
  capture_progress_add(b->progress, b->stage, view->layer, view->n_tokens);
  return rc;
}

static void buffers_free(CaptureBuffers *b) {
  free(b->q);
  free(b->o);
  free(b->lse);
  free(b->attn);
  b->q = b->o = b->lse = b->attn = NULL;
}

static int buffers_alloc(CaptureBuffers *b, bool attn) {
  size_t heads = b->n_layers * b->n_heads;
  b->q = obc_malloc(heads * b->n_rows * b->head_dim * sizeof(float), "captured Q");
  b->o = obc_malloc(heads * b->n_rows * b->head_dim * sizeof(float), "captured O");
  b->lse = obc_malloc(heads * b->n_rows * sizeof(float), "captured lse");
  if (attn) b->attn = obc_calloc(heads * b->n_rows * b->n_positions, sizeof(float), "captured A");
  if (!b->q || !b->o || !b->lse || (attn && !b->attn)) {
    buffers_free(b);
    return OBC_ENOMEM;
  }
  return OBC_OK;
}

static void fill_model(TraceModel *out, const Model *model) {
  const ModelConfig *c = &model->config;
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", c->name);
  snprintf(out->architecture, sizeof out->architecture, "%s", c->architecture);
  out->n_layers = c->n_layers;
  out->n_heads = c->n_heads;
  out->n_kv_heads = c->n_kv_heads;
  out->head_dim = c->head_dim;
  out->vocab_size = c->vocab_size;
  out->rope_theta = c->rope_theta;
  const char *scaling = c->rope_scaling == OBC_ROPE_LLAMA3   ? "llama3"
                        : c->rope_scaling == OBC_ROPE_LINEAR ? "linear"
                                                             : "none";
  snprintf(out->rope_scaling, sizeof out->rope_scaling, "%s", scaling);
  out->rope_factor = c->rope_factor;
  out->rope_low_freq_factor = c->rope_low_freq_factor;
  out->rope_high_freq_factor = c->rope_high_freq_factor;
  out->rope_original_context = c->rope_original_context;
  out->attn_scale = 1.0 / sqrt((double)c->head_dim);
  snprintf(out->rope_layout, sizeof out->rope_layout, "%s",
           c->rope_interleaved ? "interleaved" : "half");
}

/* Prefill with capture of the prompt rows, then T decode steps. tokens has
 * room for s + T ids; logits receives (T, vocab_size). */
static int run_model(Runtime *runtime, const NiahPrompt *prompt, const CaptureOptions *o,
                     CaptureBuffers *b, int32_t *tokens, float *logits, CaptureResult *result) {
  size_t s = prompt->n_tokens, T = o->decode, vocab = runtime_model(runtime)->config.vocab_size;
  /* every position: the sums need every prompt row, the trace the last R */
  size_t *positions = obc_malloc((s + T) * sizeof *positions, "capture row positions");
  float *next = obc_malloc(vocab * sizeof *next, "next-token logits");
  int rc = positions && next ? OBC_OK : OBC_ENOMEM;
  for (size_t r = 0; !rc && r < s + T; r++) positions[r] = r;
  memcpy(tokens, prompt->tokens, s * sizeof *tokens);

  double t0 = obc_now_seconds();
  /* host sums need every prompt row, device sums and the trace the last R */
  size_t first = b->sums && !b->device_sums ? 0 : b->first_row;
  RuntimeCapture capture = {.row_positions = positions + first,
                            .n_rows = s - first,
                            .want_attn = o->store_attn,
                            .user = b,
                            .on_layer = on_layer,
                            .sums = b->device_sums};
  b->stage = "prefill";
  if (!rc) rc = runtime_forward(runtime, prompt->tokens, s, RUNTIME_LOGITS_LAST, next, &capture);
  if (!rc && b->device_sums) {
    capture_sums_count(b->sums, 0, s);
    capture_qstats_count(b->qstats, 0, s);
  }
  if (!rc && b->sums) capture_sums_finish(b->sums);
  if (!rc && b->qstats) capture_qstats_finish(b->qstats);
  double t1 = obc_now_seconds();
  b->stage = "decode";
  for (size_t t = 0; !rc && t < T; t++) {
    int32_t token = (int32_t)generate_argmax(next, vocab);
    tokens[s + t] = token;
    RuntimeCapture step = {.row_positions = positions + s + t,
                           .n_rows = 1,
                           .want_attn = o->store_attn,
                           .user = b,
                           .on_layer = on_layer};
    rc = runtime_forward(runtime, &token, 1, RUNTIME_LOGITS_LAST, next, &step);
    if (!rc) memcpy(logits + t * vocab, next, vocab * sizeof *next);
  }
  result->prefill_seconds = t1 - t0;
  result->decode_seconds = obc_now_seconds() - t1;
  free(positions);
  free(next);
  return rc;
}

static int write_trace(const char *path, const Model *model, const NiahPrompt *prompt,
                       const CaptureOptions *o, const CaptureBuffers *b, Runtime *runtime,
                       int32_t *tokens, const float *logits, CaptureResult *result) {
  const ModelConfig *c = &model->config;
  TraceMeta meta;
  memset(&meta, 0, sizeof meta);
  snprintf(meta.producer, sizeof meta.producer, "%s",
           o->producer ? o->producer : "obcache capture");
  fill_model(&meta.model, model);
  meta.n_prompt = prompt->n_tokens;
  meta.n_decode = o->decode;
  meta.n_positions = b->n_positions;
  meta.n_rows = b->n_rows;
  int64_t *row_positions = obc_malloc(b->n_rows * sizeof *row_positions, "row positions");
  if (!row_positions) return OBC_ENOMEM;
  for (size_t r = 0; r < b->n_rows; r++) row_positions[r] = (int64_t)(b->first_row + r);
  meta.row_positions = row_positions;
  meta.tokens = tokens;
  meta.prompt_text = prompt->text;
  meta.generated_text = result->generated_text;
  meta.needle_found = result->needle_found;
  meta.n_spans = prompt->n_spans;
  memcpy(meta.spans, prompt->spans, sizeof meta.spans);
  if (b->sums) meta.agnostic_rows = b->sums->agnostic_rows;

  TraceWriteOptions wo = {.store_f16 = o->store_f16,
                          .compression_level = o->compression,
                          .store_attn = o->store_attn,
                          .store_logits = true,
                          .store_column_sums = b->sums != NULL,
                          .store_query_stats = b->qstats != NULL};
  TraceWriter *writer = NULL;
  int rc = trace_create(path, &meta, &wo, &writer);
  free(row_positions);
  if (rc) return rc;
  const RuntimeCache *cache = runtime_cache(runtime);
  size_t hd = c->head_dim, rows = b->n_rows;
  for (size_t layer = 0; !rc && layer < c->n_layers; layer++) {
    for (size_t g = 0; !rc && g < c->n_kv_heads; g++)
      rc = trace_write_kv(writer, layer, g, runtime_cache_k(cache, layer, g),
                          runtime_cache_v(cache, layer, g));
    for (size_t h = 0; !rc && h < c->n_heads; h++) {
      size_t head = layer * c->n_heads + h;
      rc = trace_write_rows(writer, layer, h, b->q + head * rows * hd, b->o + head * rows * hd,
                            b->lse + head * rows);
      if (!rc && b->attn)
        rc = trace_write_attn(writer, layer, h, b->attn + head * rows * b->n_positions);
    }
  }
  for (size_t layer = 0; !rc && b->sums && layer < c->n_layers; layer++)
    rc = trace_write_column_sums(writer, layer, capture_sums_attn(b->sums, layer),
                                 capture_sums_obc(b->sums, layer));
  if (!rc && b->sums) rc = trace_write_column_counts(writer, b->sums->counts);
  for (size_t layer = 0; !rc && b->qstats && layer < c->n_layers; layer++)
    rc = trace_write_query_stats(writer, layer, capture_qstats_sum(b->qstats, layer),
                                 capture_qstats_outer(b->qstats, layer));
  if (!rc && b->qstats)
    rc = trace_write_query_counts(writer, b->qstats->counts, b->qstats->inv_freq);
  if (!rc) rc = trace_write_logits(writer, logits);
  if (!rc) rc = trace_set_result(writer, result->generated_text, result->needle_found);
  if (!rc) return trace_commit(writer);
  trace_abort(writer);
  return rc;
}

/* Bytes of the uncompressed trace's tensors (the rest is a few kB). */
static double trace_bytes(const ModelConfig *c, const CaptureOptions *o, size_t s, size_t R) {
  double T = (double)o->decode, n = (double)s + T, rows = (double)R + T;
  double value = o->store_f16 ? 2.0 : 4.0, layers = (double)c->n_layers;
  double kv = 2.0 * layers * (double)c->n_kv_heads * n * (double)c->head_dim;
  double qo = 2.0 * layers * (double)c->n_heads * rows * (double)c->head_dim;
  double lse = layers * (double)c->n_heads * rows;
  double attn = o->store_attn ? layers * (double)c->n_heads * rows * n : 0.0;
  double d = (double)c->head_dim;
  double sums = o->skip_column_sums ? 0.0
                                    : 8.0 * layers * (double)c->n_heads * (double)s * 4.0 +
                                          16.0 * layers * (double)c->n_heads * (d + d * d);
  return (kv + qo + lse + attn) * value + sums + T * (double)c->vocab_size * 4.0 + n * 4.0;
}

static int check_inputs(const Model *model, const NiahPrompt *prompt, const CaptureOptions *o,
                        const char *out_path) {
  const ModelConfig *c = &model->config;
  if (!model->tokenizer)
    return obc_fail(OBC_EINVAL,
                    "%s: the model has no tokenizer (needed to build and check the "
                    "prompt)",
                    model->path);
  if (o->decode < 1)
    return obc_fail(OBC_EINVAL,
                    "capture: --decode %zu must be at least 1 (the oracle needs a "
                    "decode step)",
                    o->decode);
  if (!o->all_rows && o->rows < 1)
    return obc_fail(OBC_EINVAL, "capture: --rows must be at least 1");
  size_t needed = prompt->n_tokens + o->decode;
  if (c->context_length && needed > c->context_length)
    return obc_fail(OBC_EINVAL,
                    "capture: %zu prompt tokens + %zu decode steps = %zu positions, "
                    "beyond the model's context of %zu (hint: a smaller --length)",
                    prompt->n_tokens, o->decode, needed, c->context_length);
  ObcPendingFile probe; /* only checks that the folder is writable */
  int rc = obc_pending_init(&probe, out_path);
  if (rc || o->compression > 0) return rc;
  size_t R = o->all_rows || o->rows > prompt->n_tokens ? prompt->n_tokens : o->rows;
  return obc_file_check_space(out_path, trace_bytes(c, o, prompt->n_tokens, R), "the trace");
}

/* The rows of the query-agnostic column sums: those before the question. */
static size_t agnostic_rows(const NiahPrompt *prompt) {
  for (size_t i = 0; i < prompt->n_spans; i++)
    if (!strcmp(prompt->spans[i].name, "question")) return (size_t)prompt->spans[i].begin;
  return prompt->n_tokens;
}

int capture_run(const Model *model, const NiahPrompt *prompt, const CaptureOptions *o,
                const char *out_path, CaptureResult *result) {
  assert(model && prompt && o && out_path && result);
  memset(result, 0, sizeof *result);
  int rc = check_inputs(model, prompt, o, out_path);
  if (rc) return rc;
  const ModelConfig *c = &model->config;
  size_t s = prompt->n_tokens, T = o->decode;
  size_t R = o->all_rows || o->rows > s ? s : o->rows;
  CaptureProgress progress;
  capture_progress_begin(&progress, o->progress, c->n_layers, s, T);
  CaptureBuffers b = {.n_layers = c->n_layers,
                      .n_heads = c->n_heads,
                      .head_dim = c->head_dim,
                      .n_rows = R + T,
                      .n_positions = s + T,
                      .first_row = s - R,
                      .progress = &progress,
                      .stage = "prefill"};
  int32_t *tokens = obc_malloc((s + T) * sizeof *tokens, "trace tokens");
  float *logits = obc_malloc(T * c->vocab_size * sizeof *logits, "decode logits");
  if (!tokens || !logits) rc = OBC_ENOMEM;
  if (!rc) rc = buffers_alloc(&b, o->store_attn);
  RuntimeOptions ro = {.max_context = s + T, .threads = o->threads, .backend = o->device};
  Runtime *runtime = NULL;
  if (!rc) rc = runtime_create(model, &ro, &runtime);
  CaptureSums sums;
  if (!rc && !o->skip_column_sums) {
    rc = capture_sums_init(&sums, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, s,
                           agnostic_rows(prompt), (float)(1.0 / sqrt((double)c->head_dim)));
    b.sums = rc ? NULL : &sums;
    b.cache = runtime_cache(runtime);
  }
  CaptureQueryStats qstats;
  double *inv_freq = NULL;
  if (!rc && b.sums) {
    inv_freq = obc_malloc(c->head_dim / 2 * sizeof *inv_freq, "RoPE frequencies");
    if (!inv_freq) rc = OBC_ENOMEM;
    if (!rc) model_rope_inv_freq(model, inv_freq);
    if (!rc)
      rc = capture_qstats_init(&qstats, c->n_layers, c->n_heads, c->head_dim, s,
                               agnostic_rows(prompt), inv_freq, c->rope_interleaved);
    b.qstats = rc ? NULL : &qstats;
  }
  RuntimeSums device_sums;
  if (!rc && b.qstats && o->sums_place == CAPTURE_SUMS_DEVICE && runtime_device_sums(runtime)) {
    device_sums = (RuntimeSums){.n_prompt = s,
                                .agnostic_rows = sums.agnostic_rows,
                                .qstats_first_row = TRACE_QSTATS_FIRST_ROW,
                                .scale = sums.scale,
                                .attn = sums.attn,
                                .obc = sums.obc,
                                .q_sum = qstats.sum,
                                .q_outer = qstats.outer};
    b.device_sums = &device_sums;
    result->sums_on_device = true;
  }
  if (!rc) rc = run_model(runtime, prompt, o, &b, tokens, logits, result);
  if (!rc)
    rc = generate_answer_text(model->tokenizer, tokens + s, T, result->generated_text,
                              sizeof result->generated_text);
  if (!rc) {
    result->n_prompt = s;
    result->n_decode = T;
    result->needle_found = niah_answer_found(prompt, result->generated_text);
    capture_progress_stage(&progress, "writing", "writing the trace");
    double t0 = obc_now_seconds();
    rc = write_trace(out_path, model, prompt, o, &b, runtime, tokens, logits, result);
    result->write_seconds = obc_now_seconds() - t0;
  }
  capture_progress_end(&progress);
  if (b.sums) capture_sums_free(b.sums);
  if (b.qstats) capture_qstats_free(b.qstats);
  free(inv_freq);
  runtime_free(runtime);
  buffers_free(&b);
  free(tokens);
  free(logits);
  return rc;
}
