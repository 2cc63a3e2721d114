/* Synthetic trace generator (see synth.h). Every random number comes from a
 * xoshiro256** stream seeded by splitmix64 from (seed, stream, layer, head), so
 * a tensor depends only on its own coordinates: not on the thread count nor on
 * the order in which heads or layers are produced. Structure, per KV head g
 * (directions u_g "sink" and n_g "needle") and query head h:
 *   k_p = noise + [p > 0] gk pos(p) + [p == 0] a_sink u_g + [p in needle] a_needle n_g
 *   q_i = noise + gq_h pos(i) + b_sink_h u_g + [i asks] b_needle_h n_g
 *   v_p = log-normal norm * random direction, tiny for the sink
 * pos(p) is a set of slowly rotating (cos, sin) pairs, so q_i . k_p grows as
 * |i - p| shrinks (local attention), and "asks" means a question or decode
 * row. The noise and position parts are made orthogonal to u and n, so the
 * planted logits are exact. O, lse and A are then computed exactly by
 * trace_attend_rows. */
#include "traces/synth.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "traces/trace.h"
#include "traces/trace_attend.h"
#include "traces/trace_h5.h"

/* ---- random numbers ---------------------------------------------------------- */

typedef struct {
  uint64_t s[4];
  bool has_spare;
  double spare;
} SynthRng;

enum { STREAM_DIRECTIONS = 1, STREAM_KV = 2, STREAM_QUERY = 3, STREAM_TOKENS = 4 };

static uint64_t splitmix64_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void synth_rng_seed(SynthRng *rng, uint64_t seed, uint64_t stream, uint64_t layer,
                           uint64_t head) {
  uint64_t state = seed;
  state = splitmix64_next(&state) ^ (stream << 56) ^ (layer << 28) ^ head;
  for (int i = 0; i < 4; i++) rng->s[i] = splitmix64_next(&state);
  rng->has_spare = false;
}

static uint64_t rotate_left(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t synth_rng_next(SynthRng *rng) { /* xoshiro256** */
  uint64_t *s = rng->s;
  uint64_t result = rotate_left(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotate_left(s[3], 45);
  return result;
}

static double synth_rng_uniform(SynthRng *rng) { /* [0, 1) */
  return (double)(synth_rng_next(rng) >> 11) * 0x1.0p-53;
}

static double synth_rng_normal(SynthRng *rng) { /* Box-Muller, both values used */
  if (rng->has_spare) {
    rng->has_spare = false;
    return rng->spare;
  }
  double u1 = 1.0 - synth_rng_uniform(rng); /* (0, 1] so log is finite */
  double u2 = synth_rng_uniform(rng);
  double radius = sqrt(-2.0 * log(u1));
  rng->spare = radius * sin(2.0 * M_PI * u2);
  rng->has_spare = true;
  return radius * cos(2.0 * M_PI * u2);
}

/* ---- options ------------------------------------------------------------------ */

void synth_options_default(SynthOptions *o) {
  memset(o, 0, sizeof *o);
  o->n_layers = 2;
  o->n_heads = 4;
  o->n_kv_heads = 2;
  o->head_dim = 16;
  o->n_prompt = 64;
  o->n_prompt_rows = 16;
  o->n_decode = 4;
  o->seed = 1;
  o->needle_depth = 50.0;
  o->needle_length = 16;
}

int synth_options_shape(SynthOptions *o, const char *shape) {
  if (!strcmp(shape, "smollm2")) {
    o->n_layers = 30, o->n_heads = 9, o->n_kv_heads = 3, o->head_dim = 64;
  } else if (!strcmp(shape, "llama8b")) {
    o->n_layers = 32, o->n_heads = 32, o->n_kv_heads = 8, o->head_dim = 128;
    o->n_prompt = 32768, o->n_prompt_rows = 128, o->n_decode = 16;
  } else {
    return obc_fail(OBC_EINVAL, "--shape: unknown shape '%s' (expected smollm2 or llama8b)", shape);
  }
  return OBC_OK;
}

static size_t question_length(const SynthOptions *o) {
  if (o->question_length) return o->question_length;
  size_t q = o->n_prompt / 16;
  return q < 1 ? 1 : q > 8 ? 8 : q;
}

void synth_question_span(const SynthOptions *o, int64_t *begin, int64_t *end) {
  *end = (int64_t)o->n_prompt;
  *begin = *end - (int64_t)question_length(o);
}

void synth_needle_span(const SynthOptions *o, int64_t *begin, int64_t *end) {
  /* The haystack is [1, question begin): position 0 is the sink. */
  int64_t q_begin, q_end;
  synth_question_span(o, &q_begin, &q_end);
  int64_t room = q_begin - 1 - (int64_t)o->needle_length; /* free haystack positions */
  *begin = 1 + (int64_t)llround(o->needle_depth / 100.0 * (double)(room > 0 ? room : 0));
  *end = *begin + (int64_t)o->needle_length;
}

/* a * b, or SIZE_MAX when the product overflows: an allocation of that size
 * fails (OBC_ENOMEM) where a wrapped one would succeed too short. */
static size_t mul_or_max(size_t a, size_t b) {
  size_t product;
  return __builtin_mul_overflow(a, b, &product) ? SIZE_MAX : product;
}

/* *sum += a b c d e; true when the product or the sum overflows. */
static bool add_product(uint64_t *sum, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e) {
  uint64_t p;
  /* || sequences the steps: each reads the p the one before wrote. */
  return __builtin_mul_overflow(a, b, &p) || __builtin_mul_overflow(p, c, &p) ||
         __builtin_mul_overflow(p, d, &p) || __builtin_mul_overflow(p, e, &p) ||
         __builtin_add_overflow(*sum, p, sum);
}

int synth_trace_bytes(const SynthOptions *o, const char *path, uint64_t *bytes) {
  uint64_t value = o->store_f16 ? 2 : 4, n = 0, rows = 0, layer = 0, total = 0;
  bool over = __builtin_add_overflow(o->n_prompt, o->n_decode, &n);
  over |= __builtin_add_overflow(o->n_prompt_rows, o->n_decode, &rows);
  over |= add_product(&layer, 2, o->n_kv_heads, n, o->head_dim, value);   /* K, V */
  over |= add_product(&layer, 2, o->n_heads, rows, o->head_dim, value);   /* Q, O */
  over |= add_product(&layer, 1, o->n_heads, rows, 4, 1);                 /* lse, f32 */
  over |= add_product(&layer, o->store_attn, o->n_heads, rows, n, value); /* A */
  over |= add_product(&layer, 8 * o->store_column_sums, o->n_heads, o->n_prompt, 4, 1); /* sums */
  over |= add_product(&total, layer, o->n_layers, 1, 1, 1);         /* every layer */
  over |= add_product(&total, o->vocab_size > 0, n, 4, 1, 1);       /* tokens */
  over |= add_product(&total, o->n_decode, o->vocab_size, 4, 1, 1); /* logits */
  if (over) return obc_fail(OBC_EINVAL, "%s: shape too large (its byte count overflows)", path);
  *bytes = total;
  return OBC_OK;
}

static int check_options(const SynthOptions *o, const char *path) {
  if (!o->n_layers || !o->n_heads || !o->n_kv_heads || !o->head_dim || !o->n_prompt)
    return obc_fail(OBC_EINVAL, "%s: layers, heads, KV heads, head dim and prompt must be > 0",
                    path);
  if (o->n_heads % o->n_kv_heads)
    return obc_fail(OBC_EINVAL, "%s: %zu heads is not a multiple of %zu KV heads", path, o->n_heads,
                    o->n_kv_heads);
  if (o->n_prompt_rows > o->n_prompt)
    return obc_fail(OBC_EINVAL, "%s: %zu captured prompt rows but the prompt has %zu positions",
                    path, o->n_prompt_rows, o->n_prompt);
  if (o->n_prompt_rows + o->n_decode == 0)
    return obc_fail(OBC_EINVAL, "%s: no rows to capture (rows and decode are both 0)", path);
  if (o->store_column_sums && o->n_prompt_rows != o->n_prompt)
    return obc_fail(OBC_EINVAL,
                    "%s: column sums need every prompt row captured (rows %zu, prompt %zu)", path,
                    o->n_prompt_rows, o->n_prompt);
  if (!(o->needle_depth >= 0.0 && o->needle_depth <= 100.0))
    return obc_fail(OBC_EINVAL, "%s: needle depth %g%% outside 0..100", path, o->needle_depth);
  if (!o->needle_length) return obc_fail(OBC_EINVAL, "%s: needle length must be >= 1", path);
  if (o->n_prompt < 2 + o->needle_length + question_length(o))
    return obc_fail(OBC_EINVAL,
                    "%s: prompt of %zu positions is too short for a sink, a %zu-token needle and a "
                    "%zu-token question (need %zu)",
                    path, o->n_prompt, o->needle_length, question_length(o),
                    2 + o->needle_length + question_length(o));
  if (o->head_dim > 4096 || o->n_prompt + o->n_decode > (size_t)1 << 30)
    return obc_fail(OBC_EINVAL, "%s: shape too large", path);
  uint64_t bytes;
  return synth_trace_bytes(o, path, &bytes);
}

/* ---- structure ------------------------------------------------------------------- */

/* Everything shared by all heads of the trace. */
typedef struct {
  const SynthOptions *options;
  size_t n_positions, n_rows;
  const int64_t *row_positions; /* (n_rows) */
  size_t n_pairs;               /* rotating (cos, sin) pairs in dims [0, 2 n_pairs) */
  double *positions;            /* (n_positions, 2 n_pairs) cos, sin of position * frequency */
  double scale;                 /* 1/sqrt(d) */
  double key_position_gain;     /* gk */
  double key_spike;             /* a_sink = a_needle: norm of the planted key components */
  int64_t needle_begin, needle_end, question_begin;
} SynthPlan;

/* Random unit directions u (sink) and n (needle, orthogonal to u) of one KV head. */
static void synth_directions(const SynthPlan *plan, size_t layer, size_t kv_head, double *u,
                             double *n /* (head_dim) each */) {
  size_t d = plan->options->head_dim;
  SynthRng rng;
  synth_rng_seed(&rng, plan->options->seed, STREAM_DIRECTIONS, layer, kv_head);
  double uu = 0.0, un = 0.0, nn = 0.0;
  for (size_t j = 0; j < d; j++) u[j] = synth_rng_normal(&rng), uu += u[j] * u[j];
  for (size_t j = 0; j < d; j++) u[j] /= sqrt(uu);
  for (size_t j = 0; j < d; j++) n[j] = synth_rng_normal(&rng), un += n[j] * u[j];
  for (size_t j = 0; j < d; j++) n[j] -= un * u[j], nn += n[j] * n[j];
  for (size_t j = 0; j < d; j++) n[j] /= sqrt(nn);
}

static void add_position(const SynthPlan *plan, int64_t position, double gain, double *x) {
  const double *row = plan->positions + (size_t)position * 2 * plan->n_pairs;
  for (size_t j = 0; j < 2 * plan->n_pairs; j++) x[j] += gain * row[j];
}

/* Removes the components of x along the unit, orthogonal u and n, so that
 * the planted sink and needle logits are exactly what the plan says. */
static void project_out(double *x /* (d) */, const double *u, const double *n, size_t d) {
  double xu = 0.0, xn = 0.0;
  for (size_t j = 0; j < d; j++) xu += x[j] * u[j], xn += x[j] * n[j];
  for (size_t j = 0; j < d; j++) x[j] -= xu * u[j] + xn * n[j];
}

/* K and V of one (layer, KV head), as float (what is stored). */
static void synth_keys_values(const SynthPlan *plan, size_t layer, size_t kv_head,
                              float *K /* (n_positions, d) */, float *V /* (n_positions, d) */,
                              double *work /* (3 d) */) {
  const SynthOptions *o = plan->options;
  size_t d = o->head_dim;
  double *u = work, *n = work + d, *x = work + 2 * d;
  synth_directions(plan, layer, kv_head, u, n);
  SynthRng rng;
  synth_rng_seed(&rng, o->seed, STREAM_KV, layer, kv_head);
  for (size_t p = 0; p < plan->n_positions; p++) {
    for (size_t j = 0; j < d; j++) x[j] = synth_rng_normal(&rng);
    bool sink = p == 0;
    if (!sink) add_position(plan, (int64_t)p, plan->key_position_gain, x); /* the sink has none */
    project_out(x, u, n, d);
    bool needle = (int64_t)p >= plan->needle_begin && (int64_t)p < plan->needle_end;
    for (size_t j = 0; j < d; j++)
      K[p * d + j] = (float)(x[j] + (sink ? plan->key_spike * u[j] : 0.0) +
                             (needle ? plan->key_spike * n[j] : 0.0));
    /* Value: random direction, log-normal norm (median 1); the sink's is tiny,
     * as in real models, where the sink absorbs attention but adds little. */
    double norm2 = 0.0;
    for (size_t j = 0; j < d; j++) x[j] = synth_rng_normal(&rng), norm2 += x[j] * x[j];
    double norm = exp(0.5 * synth_rng_normal(&rng)) * (sink ? 0.05 : 1.0);
    for (size_t j = 0; j < d; j++) V[p * d + j] = (float)(x[j] * norm / sqrt(norm2));
  }
  if (o->store_f16) {
    trace_h5_round_to_half(K, plan->n_positions * d);
    trace_h5_round_to_half(V, plan->n_positions * d);
  }
}

/* Q of one (layer, query head). Each head draws its own strengths, relative
 * to log s because the s haystack keys together weigh about s e^0.5: a sink
 * logit of log s - 1 .. log s + 3 (sink mass ~0.2..0.9), a local boost at
 * distance 0 of 1 + 0.2 log s .. 1 + log s (decaying with log distance), and a needle logit of log s .. log s + 2 for about a third of
 * the heads, the "retrieval heads" (the needle then dominates the question and
 * decode rows), and of 0.5 log s - 2 .. 0.5 log s + 1 for the others. */
static void synth_queries(const SynthPlan *plan, size_t layer, size_t head,
                          float *Q /* (n_rows, d) */, double *work /* (3 d) */) {
  const SynthOptions *o = plan->options;
  size_t d = o->head_dim;
  size_t kv_head = head / (o->n_heads / o->n_kv_heads);
  double *u = work, *n = work + d, *x = work + 2 * d;
  synth_directions(plan, layer, kv_head, u, n);
  SynthRng rng;
  synth_rng_seed(&rng, o->seed, STREAM_QUERY, layer, head);
  double log_s = log((double)o->n_prompt);
  double sink_logit = log_s - 1.0 + 4.0 * synth_rng_uniform(&rng);
  double local_logit = 1.0 + (0.2 + 0.8 * synth_rng_uniform(&rng)) * log_s;
  bool retrieval = synth_rng_uniform(&rng) < 0.35;
  double strength = synth_rng_uniform(&rng);
  double needle_logit = retrieval ? log_s + 2.0 * strength : 0.5 * log_s - 2.0 + 3.0 * strength;
  double spike_logit = plan->key_spike * plan->scale; /* logit per unit of q along u or n */
  double sink_gain = sink_logit / spike_logit;
  double needle_gain = needle_logit / spike_logit;
  double position_gain =
      plan->n_pairs ? local_logit / (plan->key_position_gain * (double)plan->n_pairs * plan->scale)
                    : 0.0;
  for (size_t i = 0; i < plan->n_rows; i++) {
    int64_t position = plan->row_positions[i];
    bool asks = position >= plan->question_begin; /* question or decode row */
    for (size_t j = 0; j < d; j++) x[j] = synth_rng_normal(&rng);
    add_position(plan, position, position_gain, x);
    project_out(x, u, n, d);
    for (size_t j = 0; j < d; j++)
      Q[i * d + j] = (float)(x[j] + sink_gain * u[j] + (asks ? needle_gain * n[j] : 0.0));
  }
  if (o->store_f16) trace_h5_round_to_half(Q, plan->n_rows * d);
}

/* ---- per-layer buffers --------------------------------------------------------------- */

typedef struct {
  float *K, *V;      /* (n_kv_heads, n_positions, d) */
  double *Kd, *Vd;   /* same, double */
  float *Q, *O;      /* (n_heads, n_rows, d) */
  float *lse;        /* (n_heads, n_rows) */
  float *A;          /* (n_heads, n_rows, n_positions) or NULL */
  double *sums_attn; /* (TRACE_ROWS_VARIANTS, n_heads, n_prompt) or NULL */
  double *sums_obc;  /* (TRACE_ROWS_VARIANTS, TRACE_OBC_TERMS, n_heads, n_prompt) or NULL */
  size_t n_threads;
  double *thread_scratch; /* (n_threads, scratch_size) */
  size_t scratch_size;    /* Qd, Od (n_rows d each), lse (n_rows), P (n_rows n_positions), 3 d */
} SynthLayer;

static void synth_layer_free(SynthLayer *l) {
  free(l->K), free(l->V), free(l->Kd), free(l->Vd), free(l->Q), free(l->O), free(l->lse),
      free(l->A);
  free(l->sums_attn), free(l->sums_obc);
  free(l->thread_scratch);
  memset(l, 0, sizeof *l);
}

static int synth_layer_alloc(SynthLayer *l, const SynthPlan *plan) {
  const SynthOptions *o = plan->options;
  /* The trace's byte count did not overflow (check_options), so neither do
   * these sizes in float; the double copies and the scratch (rows x
   * positions per thread, not in the trace without A) saturate instead. */
  size_t kv = o->n_kv_heads * plan->n_positions * o->head_dim;
  size_t rows = o->n_heads * plan->n_rows * o->head_dim;
  memset(l, 0, sizeof *l);
  l->n_threads = (size_t)omp_get_max_threads();
  l->scratch_size = 2 * plan->n_rows * o->head_dim + plan->n_rows +
                    mul_or_max(plan->n_rows, plan->n_positions) + 3 * o->head_dim;
  if (l->scratch_size < plan->n_rows) l->scratch_size = SIZE_MAX; /* the sum wrapped */
  l->K = obc_malloc(kv * sizeof(float), "synthetic K");
  l->V = obc_malloc(kv * sizeof(float), "synthetic V");
  l->Kd = obc_malloc(mul_or_max(kv, sizeof(double)), "synthetic K (double)");
  l->Vd = obc_malloc(mul_or_max(kv, sizeof(double)), "synthetic V (double)");
  l->Q = obc_malloc(rows * sizeof(float), "synthetic Q");
  l->O = obc_malloc(rows * sizeof(float), "synthetic O");
  l->lse = obc_malloc(o->n_heads * plan->n_rows * sizeof(float), "synthetic lse");
  if (o->store_attn)
    l->A = obc_malloc(o->n_heads * plan->n_rows * plan->n_positions * sizeof(float), "synthetic A");
  l->thread_scratch = obc_malloc(
      mul_or_max(l->n_threads, mul_or_max(l->scratch_size, sizeof(double))), "synthesis scratch");
  if (o->store_column_sums) {
    size_t plane = o->n_heads * o->n_prompt;
    l->sums_attn = obc_calloc(TRACE_ROWS_VARIANTS * plane, sizeof(double), "synthetic sums");
    l->sums_obc =
        obc_calloc(TRACE_ROWS_VARIANTS * TRACE_OBC_TERMS * plane, sizeof(double), "synthetic sums");
  }
  bool sums_ok = !o->store_column_sums || (l->sums_attn && l->sums_obc);
  if (!l->K || !l->V || !l->Kd || !l->Vd || !l->Q || !l->O || !l->lse || (o->store_attn && !l->A) ||
      !l->thread_scratch || !sums_ok) {
    synth_layer_free(l);
    return OBC_ENOMEM;
  }
  return OBC_OK;
}

/* The column sums of query head h from its exact rows (every prompt row is
 * one, R = s): per position p, over the rows i >= p before agnostic_rows and
 * over all prompt rows, A, A^2 vv, (A z)^2 dd and A^2 ||v + z (v - o)||^2,
 * with z recomputed as scale q.k. */
static void synth_column_sums(const SynthPlan *plan, const SynthLayer *l, size_t h,
                              const double *Qd, const double *Od, const double *probs,
                              size_t agnostic_rows) {
  const SynthOptions *o = plan->options;
  const size_t d = o->head_dim, P = plan->n_positions, S = o->n_prompt, plane = o->n_heads * S;
  const double *K = l->Kd + h / (o->n_heads / o->n_kv_heads) * P * d;
  const double *V = l->Vd + h / (o->n_heads / o->n_kv_heads) * P * d;
  for (size_t i = 0; i < S; i++) {
    const double *q = Qd + i * d, *oi = Od + i * d;
    for (size_t p = 0; p <= i; p++) {
      const double *k = K + p * d, *v = V + p * d;
      double z = 0.0, vv = 0.0, dd = 0.0, vz = 0.0;
      for (size_t c = 0; c < d; c++) z += q[c] * k[c];
      z *= plan->scale;
      for (size_t c = 0; c < d; c++) {
        double diff = v[c] - oi[c], mixed = v[c] + z * diff;
        vv += v[c] * v[c], dd += diff * diff, vz += mixed * mixed;
      }
      double a = probs[i * P + p], a2 = a * a;
      double terms[1 + TRACE_OBC_TERMS] = {a, a2 * vv, a2 * z * z * dd, a2 * vz};
      for (int variant = 0; variant < TRACE_ROWS_VARIANTS; variant++) {
        if (variant == TRACE_ROWS_AGNOSTIC && i >= agnostic_rows) continue;
        l->sums_attn[variant * plane + h * S + p] += terms[0];
        for (int t = 0; t < TRACE_OBC_TERMS; t++)
          l->sums_obc[(variant * TRACE_OBC_TERMS + t) * plane + h * S + p] += terms[1 + t];
      }
    }
  }
}

/* Generates one layer: K/V per KV head, then Q and exact attention per head. */
static void synth_layer_compute(const SynthPlan *plan, size_t layer, SynthLayer *l) {
  const SynthOptions *o = plan->options;
  const size_t d = o->head_dim, P = plan->n_positions, R = plan->n_rows;
  const size_t group = o->n_heads / o->n_kv_heads;
  TraceAttendShape shape = {R, P, d, plan->scale, plan->row_positions};
  if (l->sums_attn) {
    size_t plane = o->n_heads * o->n_prompt;
    memset(l->sums_attn, 0, TRACE_ROWS_VARIANTS * plane * sizeof(double));
    memset(l->sums_obc, 0, TRACE_ROWS_VARIANTS * TRACE_OBC_TERMS * plane * sizeof(double));
  }
#pragma omp parallel num_threads((int)l->n_threads)
  {
    double *scratch = l->thread_scratch + (size_t)omp_get_thread_num() * l->scratch_size;
    double *Qd = scratch, *Od = Qd + R * d, *lse = Od + R * d, *probs = lse + R,
           *work = probs + R * P;
#pragma omp for schedule(dynamic, 1)
    for (size_t g = 0; g < o->n_kv_heads; g++) {
      float *K = l->K + g * P * d, *V = l->V + g * P * d;
      synth_keys_values(plan, layer, g, K, V, work);
      for (size_t i = 0; i < P * d; i++) l->Kd[g * P * d + i] = K[i], l->Vd[g * P * d + i] = V[i];
    }
#pragma omp for schedule(dynamic, 1)
    for (size_t h = 0; h < o->n_heads; h++) {
      float *Q = l->Q + h * R * d;
      synth_queries(plan, layer, h, Q, work);
      for (size_t i = 0; i < R * d; i++) Qd[i] = Q[i];
      size_t g = h / group;
      trace_attend_rows(&shape, Qd, l->Kd + g * P * d, l->Vd + g * P * d, probs, Od, lse);
      for (size_t i = 0; i < R * d; i++) l->O[h * R * d + i] = (float)Od[i];
      for (size_t i = 0; i < R; i++) l->lse[h * R + i] = (float)lse[i];
      if (l->A)
        for (size_t i = 0; i < R * P; i++) l->A[h * R * P + i] = (float)probs[i];
      if (l->sums_attn) {
        int64_t question, end;
        synth_question_span(o, &question, &end);
        synth_column_sums(plan, l, h, Qd, Od, probs, (size_t)question);
      }
    }
  }
}

static int synth_layer_write(const SynthPlan *plan, size_t layer, const SynthLayer *l,
                             TraceWriter *writer) {
  const SynthOptions *o = plan->options;
  const size_t d = o->head_dim, P = plan->n_positions, R = plan->n_rows;
  int rc = OBC_OK;
  for (size_t g = 0; !rc && g < o->n_kv_heads; g++)
    rc = trace_write_kv(writer, layer, g, l->K + g * P * d, l->V + g * P * d);
  for (size_t h = 0; !rc && h < o->n_heads; h++) {
    rc = trace_write_rows(writer, layer, h, l->Q + h * R * d, l->O + h * R * d, l->lse + h * R);
    if (!rc && l->A) rc = trace_write_attn(writer, layer, h, l->A + h * R * P);
  }
  if (!rc && l->sums_attn) rc = trace_write_column_sums(writer, layer, l->sums_attn, l->sums_obc);
  return rc;
}

/* /column_counts: the rows before the question, and every prompt row, that
 * saw each position. */
static int synth_write_column_counts(const SynthOptions *o, const TraceMeta *meta,
                                     TraceWriter *writer) {
  size_t S = o->n_prompt;
  int64_t *counts = obc_malloc(TRACE_ROWS_VARIANTS * S * sizeof *counts, "column counts");
  if (!counts) return OBC_ENOMEM;
  for (size_t p = 0; p < S; p++) {
    counts[p] = p < meta->agnostic_rows ? (int64_t)(meta->agnostic_rows - p) : 0;
    counts[S + p] = (int64_t)(S - p);
  }
  int rc = trace_write_column_counts(writer, counts);
  free(counts);
  return rc;
}

/* ---- trace metadata ------------------------------------------------------------------ */

static int synth_meta_fill(const SynthOptions *o, const SynthPlan *plan, TraceMeta *m) {
  memset(m, 0, sizeof *m);
  TraceModel *c = &m->model;
  snprintf(c->name, sizeof c->name, "%s", o->model_name ? o->model_name : "synthetic");
  snprintf(c->architecture, sizeof c->architecture, "synthetic");
  c->n_layers = o->n_layers, c->n_heads = o->n_heads, c->n_kv_heads = o->n_kv_heads;
  c->head_dim = o->head_dim, c->vocab_size = o->vocab_size;
  snprintf(c->rope_scaling, sizeof c->rope_scaling, "none"); /* no RoPE: rope_theta 0 */
  c->attn_scale = plan->scale;
  if (o->producer)
    snprintf(m->producer, sizeof m->producer, "%s", o->producer);
  else
    snprintf(m->producer, sizeof m->producer,
             "synth seed=%llu layers=%zu heads=%zu kv_heads=%zu head_dim=%zu prompt=%zu rows=%zu "
             "decode=%zu vocab=%zu needle_depth=%g needle_length=%zu question_length=%zu",
             (unsigned long long)o->seed, o->n_layers, o->n_heads, o->n_kv_heads, o->head_dim,
             o->n_prompt, o->n_prompt_rows, o->n_decode, o->vocab_size, o->needle_depth,
             o->needle_length, question_length(o));
  m->n_prompt = o->n_prompt, m->n_decode = o->n_decode, m->n_positions = plan->n_positions;
  m->n_rows = plan->n_rows;
  m->needle_found = -1;
  m->row_positions = obc_malloc(plan->n_rows * sizeof *m->row_positions, "row positions");
  if (!m->row_positions) return OBC_ENOMEM;
  memcpy(m->row_positions, plan->row_positions, plan->n_rows * sizeof *m->row_positions);
  m->n_spans = 2;
  snprintf(m->spans[0].name, sizeof m->spans[0].name, "needle");
  m->spans[0].begin = plan->needle_begin, m->spans[0].end = plan->needle_end;
  snprintf(m->spans[1].name, sizeof m->spans[1].name, "question");
  m->spans[1].begin = plan->question_begin, m->spans[1].end = (int64_t)o->n_prompt;
  if (o->vocab_size) {
    m->tokens = obc_malloc(plan->n_positions * sizeof *m->tokens, "tokens");
    if (!m->tokens) return OBC_ENOMEM;
    SynthRng rng;
    synth_rng_seed(&rng, o->seed, STREAM_TOKENS, 0, 0);
    for (size_t p = 0; p < plan->n_positions; p++)
      m->tokens[p] = (int32_t)(synth_rng_next(&rng) % o->vocab_size);
  }
  return OBC_OK;
}

/* Logits row t (computed at position s + t): noise plus a clear winner, the
 * token at position s + t + 1 when the trace has it. */
static int synth_write_logits(const SynthOptions *o, const TraceMeta *m, TraceWriter *writer) {
  float *logits = obc_malloc(o->n_decode * o->vocab_size * sizeof *logits, "synthetic logits");
  if (!logits) return OBC_ENOMEM;
  SynthRng rng;
  synth_rng_seed(&rng, o->seed, STREAM_TOKENS, 1, 0);
  for (size_t t = 0; t < o->n_decode; t++) {
    float *row = logits + t * o->vocab_size;
    for (size_t v = 0; v < o->vocab_size; v++) row[v] = (float)(2.0 * synth_rng_normal(&rng));
    size_t next = o->n_prompt + t + 1;
    if (next < m->n_positions) row[m->tokens[next]] += 12.0f;
  }
  int rc = trace_write_logits(writer, logits);
  free(logits);
  return rc;
}

int synth_generate(const SynthOptions *o, const char *path) {
  int rc = check_options(o, path);
  if (rc) return rc;
  SynthPlan plan = {.options = o};
  plan.n_positions = o->n_prompt + o->n_decode;
  plan.n_rows = o->n_prompt_rows + o->n_decode;
  plan.n_pairs = o->head_dim / 4;
  plan.scale = 1.0 / sqrt((double)o->head_dim);
  plan.key_position_gain = 1.0;
  plan.key_spike = sqrt((double)o->head_dim); /* a planted logit of 1 per unit of q */
  synth_needle_span(o, &plan.needle_begin, &plan.needle_end);
  int64_t question_end;
  synth_question_span(o, &plan.question_begin, &question_end);
  int64_t *row_positions = obc_malloc(plan.n_rows * sizeof *row_positions, "row positions");
  plan.positions =
      obc_malloc(plan.n_positions * 2 * plan.n_pairs * sizeof(double), "position table");
  if (!row_positions || !plan.positions) {
    free(row_positions), free(plan.positions);
    return OBC_ENOMEM;
  }
  for (size_t i = 0; i < plan.n_rows; i++)
    row_positions[i] = (int64_t)(o->n_prompt - o->n_prompt_rows + i);
  plan.row_positions = row_positions;
  /* Frequencies from 1 down to 1/n_positions radians per position, evenly
   * spaced in log: the boost decays roughly with log distance. */
  for (size_t j = 0; j < plan.n_pairs; j++) {
    double t = plan.n_pairs > 1 ? (double)j / (double)(plan.n_pairs - 1) : 0.0;
    double frequency = exp(-t * log((double)plan.n_positions));
    for (size_t p = 0; p < plan.n_positions; p++) {
      plan.positions[p * 2 * plan.n_pairs + 2 * j] = cos((double)p * frequency);
      plan.positions[p * 2 * plan.n_pairs + 2 * j + 1] = sin((double)p * frequency);
    }
  }

  TraceMeta meta;
  TraceWriter *writer = NULL;
  SynthLayer layer_buffers;
  memset(&layer_buffers, 0, sizeof layer_buffers);
  rc = synth_meta_fill(o, &plan, &meta);
  TraceWriteOptions write_options = {.store_f16 = o->store_f16,
                                     .compression_level = o->compression_level,
                                     .store_attn = o->store_attn,
                                     .store_logits = o->vocab_size > 0,
                                     .store_column_sums = o->store_column_sums};
  if (!rc && o->store_column_sums) {
    int64_t question, end;
    synth_question_span(o, &question, &end);
    meta.agnostic_rows = (size_t)question;
  }
  if (!rc) rc = synth_layer_alloc(&layer_buffers, &plan);
  if (!rc) rc = trace_create(path, &meta, &write_options, &writer);
  for (size_t layer = 0; !rc && layer < o->n_layers; layer++) {
    synth_layer_compute(&plan, layer, &layer_buffers);
    rc = synth_layer_write(&plan, layer, &layer_buffers, writer);
  }
  if (!rc && o->store_column_sums) rc = synth_write_column_counts(o, &meta, writer);
  if (!rc && o->vocab_size) rc = synth_write_logits(o, &meta, writer);
  if (!rc) {
    rc = trace_commit(writer);
    writer = NULL;
  }
  if (writer) trace_abort(writer);
  synth_layer_free(&layer_buffers);
  trace_meta_free(&meta);
  free(row_positions);
  free(plan.positions);
  return rc;
}
