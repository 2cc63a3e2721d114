/* Random attention problems for one (layer, KV head) and brute-force twins of
 * every score and exact error, written straight from docs/SCIENCE.md
 * ("Notation", "Approximate scores", "Exact errors over the window") in
 * double: perturb, recompute attention from Q, K, V, measure. Shared by
 * tests/test_oracle.c and tests/test_scores.c; header-only (static functions).
 *
 * The problems are shaped like real traces: a sink key at position 0 whose
 * logit is ~7 above the rest (so A is peaked, often above 1/2), a "needle" key
 * with a large logit, and generated tokens' keys after the prompt. */
#ifndef OBC_FIXTURE_ATTENTION_H
#define OBC_FIXTURE_ATTENTION_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scores/scores.h"
#include "oracle/oracle.h"

typedef struct {
  OracleHead head;
  int64_t *positions; /* (n_rows) */
  double *K;          /* (n_positions, d) */
  double *V;          /* (n_positions, d) */
  double *Q;          /* (group, n_rows, d) */
  double *O;          /* (group, n_rows, d) */
  double *lse;        /* (group, n_rows) */
} FixtureProblem;

static uint64_t fixture_rng_state;

static inline double fixture_uniform(void) {
  /* splitmix64 */
  uint64_t z = (fixture_rng_state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static inline double fixture_normal(void) {
  double u = fixture_uniform(), v = fixture_uniform();
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static inline double fixture_dot(const double *x, const double *y, size_t d) {
  double s = 0.0;
  for (size_t c = 0; c < d; c++) s += x[c] * y[c];
  return s;
}

/* Perturbations of token p. */
enum { FIX_NONE, FIX_ZERO_V, FIX_ZERO_K, FIX_ZERO_VK, FIX_REMOVE };

/* Attention output o (d) of query q at `position` over keys 0..position,
 * with token p perturbed by `mode`, from scratch. No key left: o = 0. */
static inline void fixture_output(const FixtureProblem *t, const double *q, size_t position,
                                  int mode, size_t p, double *o) {
  size_t d = t->head.head_dim;
  double zmax = -HUGE_VAL;
  double *z = malloc((position + 1) * sizeof *z);
  for (size_t k = 0; k <= position; k++) {
    int zero_k = k == p && (mode == FIX_ZERO_K || mode == FIX_ZERO_VK);
    z[k] = zero_k ? 0.0 : t->head.attn_scale * fixture_dot(q, t->K + k * d, d);
    if (!(k == p && mode == FIX_REMOVE) && z[k] > zmax) zmax = z[k];
  }
  double total = 0.0;
  memset(o, 0, d * sizeof *o);
  for (size_t k = 0; k <= position; k++) {
    if (k == p && mode == FIX_REMOVE) continue;
    double w = exp(z[k] - zmax);
    total += w;
    if (k == p && (mode == FIX_ZERO_V || mode == FIX_ZERO_VK)) continue;
    for (size_t c = 0; c < d; c++) o[c] += w * t->V[k * d + c];
  }
  if (total > 0)
    for (size_t c = 0; c < d; c++) o[c] /= total;
  free(z);
}

/* Builds a problem: prompt s, T decode steps (keys s..s+T-1 exist and their
 * query rows are captured), the last `prompt_rows` prompt rows captured. */
static inline void fixture_make(FixtureProblem *t, uint64_t seed, size_t s, size_t T, size_t d,
                                size_t group, size_t prompt_rows) {
  fixture_rng_state = seed;
  size_t n_pos = s + T, n_rows = prompt_rows + T;
  t->positions = malloc(n_rows * sizeof *t->positions);
  t->K = malloc(n_pos * d * sizeof(double));
  t->V = malloc(n_pos * d * sizeof(double));
  t->Q = malloc(group * n_rows * d * sizeof(double));
  t->O = malloc(group * n_rows * d * sizeof(double));
  t->lse = malloc(group * n_rows * sizeof(double));
  for (size_t r = 0; r < n_rows; r++) t->positions[r] = (int64_t)(s - prompt_rows + r);
  double *u = malloc(d * sizeof *u); /* the shared "attention sink" direction */
  double norm = 0.0;
  for (size_t c = 0; c < d; c++) {
    u[c] = fixture_normal();
    norm += u[c] * u[c];
  }
  for (size_t c = 0; c < d; c++) u[c] /= sqrt(norm);
  double scale = 1.0 / sqrt((double)d);
  size_t needle = s / 3 + 1;
  for (size_t p = 0; p < n_pos; p++)
    for (size_t c = 0; c < d; c++) {
      t->K[p * d + c] = fixture_normal() + (p == 0 ? 3.2 * sqrt((double)d) * u[c] : 0.0) +
                        (p == needle ? 2.0 * sqrt((double)d) * u[c] : 0.0);
      t->V[p * d + c] = (p == 0 ? 0.2 : 1.0) * fixture_normal() + 0.3;
    }
  for (size_t j = 0; j < group; j++)
    for (size_t r = 0; r < n_rows; r++)
      for (size_t c = 0; c < d; c++)
        t->Q[(j * n_rows + r) * d + c] = 0.8 * fixture_normal() + (1.5 + 0.5 * (double)j) * u[c];
  free(u);
  t->head = (OracleHead){.n_positions = n_pos,
                         .n_prompt = s,
                         .head_dim = d,
                         .group_size = group,
                         .n_rows = n_rows,
                         .row_positions = t->positions,
                         .K = t->K,
                         .V = t->V,
                         .Q = t->Q,
                         .O = t->O,
                         .lse = t->lse,
                         .attn_scale = scale};
  /* O and lse of the full-cache run, in double, from scratch. */
  for (size_t j = 0; j < group; j++)
    for (size_t r = 0; r < n_rows; r++) {
      size_t ho = j * n_rows + r, pos = (size_t)t->positions[r];
      const double *q = t->Q + ho * d;
      fixture_output(t, q, pos, FIX_NONE, 0, t->O + ho * d);
      double zmax = -HUGE_VAL, total = 0.0;
      for (size_t k = 0; k <= pos; k++) {
        double z = scale * fixture_dot(q, t->K + k * d, d);
        zmax = z > zmax ? z : zmax;
      }
      for (size_t k = 0; k <= pos; k++)
        total += exp(scale * fixture_dot(q, t->K + k * d, d) - zmax);
      t->lse[ho] = zmax + log(total);
    }
}

static inline void fixture_free(FixtureProblem *t) {
  free(t->positions);
  free(t->K);
  free(t->V);
  free(t->Q);
  free(t->O);
  free(t->lse);
}

/* Brute-force exact error for the captured rows row_begin..row_end-1: for
 * each prompt token p, sum over rows (p <= position) and heads of
 * ||o'_i - o_i||^2 with p perturbed by `mode`. out (n_prompt). */
static inline void fixture_exact_error(const FixtureProblem *t, size_t row_begin, size_t row_end,
                                       int mode, double *out) {
  size_t d = t->head.head_dim, s = t->head.n_prompt, n_rows = t->head.n_rows;
  double *o = malloc(d * sizeof *o), *o_new = malloc(d * sizeof *o_new);
  for (size_t p = 0; p < s; p++) {
    double total = 0.0;
    for (size_t j = 0; j < t->head.group_size; j++)
      for (size_t r = row_begin; r < row_end; r++) {
        size_t pos = (size_t)t->positions[r];
        if (p > pos) continue;
        const double *q = t->Q + (j * n_rows + r) * d;
        fixture_output(t, q, pos, FIX_NONE, p, o);
        fixture_output(t, q, pos, mode, p, o_new);
        for (size_t c = 0; c < d; c++) total += (o_new[c] - o[c]) * (o_new[c] - o[c]);
      }
    out[p] = total;
  }
  free(o);
  free(o_new);
}

/* Row range of the window of the last W prompt rows. */
static inline void fixture_window_rows(const FixtureProblem *t, size_t window, size_t *begin,
                                       size_t *end) {
  size_t s = t->head.n_prompt, r = 0;
  while (r < t->head.n_rows && t->positions[r] < (int64_t)s) r++;
  *end = r;
  *begin = r - window;
}

/* Brute-force approximate scores (docs/SCIENCE.md, "Approximate scores") over
 * the window of the last W prompt rows, A and z by explicit loops (no GEMM, no
 * captured lse), combined across heads by `how`. out (OBC_Q_COUNT, n_prompt);
 * the exact quantities are left untouched. */
static inline void fixture_scores(const FixtureProblem *t, size_t window, ScoreGqa how,
                                  size_t kernel, double *out) {
  size_t d = t->head.head_dim, s = t->head.n_prompt, g = t->head.group_size;
  size_t begin, end;
  fixture_window_rows(t, window, &begin, &end);
  const int quantities[5] = {OBC_Q_ATTN, OBC_Q_ATTN2, OBC_Q_OBC_V, OBC_Q_OBC_K, OBC_Q_OBC_VK};
  double *per_head = calloc(g * 5 * s, sizeof *per_head); /* (g, 5, s) */
  double *o = malloc(d * sizeof *o), *z = malloc(t->head.n_positions * sizeof *z);
  for (size_t j = 0; j < g; j++)
    for (size_t r = begin; r < end; r++) {
      size_t pos = (size_t)t->positions[r];
      const double *q = t->Q + (j * t->head.n_rows + r) * d;
      double zmax = -HUGE_VAL, total = 0.0;
      for (size_t k = 0; k <= pos; k++) {
        z[k] = t->head.attn_scale * fixture_dot(q, t->K + k * d, d);
        zmax = z[k] > zmax ? z[k] : zmax;
      }
      for (size_t k = 0; k <= pos; k++) total += exp(z[k] - zmax);
      double lse = zmax + log(total);
      memset(o, 0, d * sizeof *o);
      for (size_t k = 0; k <= pos; k++)
        for (size_t c = 0; c < d; c++) o[c] += exp(z[k] - lse) * t->V[k * d + c];
      for (size_t p = 0; p <= pos && p < s; p++) {
        const double *v = t->V + p * d;
        double a = exp(z[p] - lse), vv = fixture_dot(v, v, d), vo = fixture_dot(v, o, d);
        double diff2 = 0.0;
        for (size_t c = 0; c < d; c++) diff2 += (v[c] - o[c]) * (v[c] - o[c]);
        double obc_v = a * a * vv, obc_k = (a * z[p]) * (a * z[p]) * diff2;
        double *h = per_head + j * 5 * s;
        h[0 * s + p] += a;
        h[1 * s + p] += a * a;
        h[2 * s + p] += obc_v;
        h[3 * s + p] += obc_k;
        h[4 * s + p] += obc_v + obc_k + 2.0 * a * a * z[p] * (vv - vo);
      }
    }
  for (int m = 0; m < 5; m++)
    for (size_t p = 0; p < s; p++) {
      double acc = per_head[m * s + p];
      for (size_t j = 1; j < g; j++) {
        double x = per_head[(j * 5 + m) * s + p];
        acc = how == OBC_GQA_MAX ? (x > acc ? x : acc) : acc + x;
      }
      out[quantities[m] * s + p] = how == OBC_GQA_MEAN ? acc / (double)g : acc;
    }
  for (size_t p = 0; p < s; p++) {
    double l1 = 0.0;
    for (size_t c = 0; c < d; c++) l1 += fabs(t->V[p * d + c]);
    out[OBC_Q_ATTN_VL1 * s + p] = out[OBC_Q_ATTN * s + p] * l1;
    double best = -HUGE_VAL;
    for (size_t k = 0; k < s; k++)
      if (k + kernel / 2 >= p && k <= p + kernel / 2 && out[OBC_Q_ATTN * s + k] > best)
        best = out[OBC_Q_ATTN * s + k];
    out[OBC_Q_ATTN_MAXPOOL * s + p] = best;
  }
  free(per_head);
  free(o);
  free(z);
}

/* Largest relative error of x against ref over n elements, each measured
 * against max(|ref_p|, 1e-12 max|ref|): every quantity is a sum of
 * non-negative terms whose relative error is bounded by that of the inputs
 * (a, dd, ...), so per element is the meaningful test; the floor only keeps
 * exact zeros (tokens no row sees) from dividing by zero. Prints both sides
 * of the worst element when it exceeds tol. */
static inline double fixture_rel_error(const double *x, const double *ref, size_t n, double tol,
                                       const char *what) {
  double ref_max = 0.0;
  for (size_t i = 0; i < n; i++) ref_max = fabs(ref[i]) > ref_max ? fabs(ref[i]) : ref_max;
  double worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    double floor = 1e-12 * ref_max, scale = fabs(ref[i]) > floor ? fabs(ref[i]) : floor;
    double err = scale > 0 ? fabs(x[i] - ref[i]) / scale : fabs(x[i] - ref[i]);
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  if (!(worst <= tol))
    fprintf(stderr, "%s: rel. error %.3g at [%zu]: got %.17g, brute force %.17g\n", what, worst, at,
            x[at], ref[at]);
  return worst;
}

/* Normwise relative error max_i |x_i - ref_i| / max_i |ref_i|: for sums of
 * rounded products whose small elements carry no meaning alone (a change of
 * summation order moves every element by a multiple of the largest term). */
static inline double fixture_normwise_error(const double *x, const double *ref, size_t n,
                                            double tol, const char *what) {
  double ref_max = 0.0, worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) ref_max = fabs(ref[i]) > ref_max ? fabs(ref[i]) : ref_max;
  for (size_t i = 0; i < n; i++) {
    double err = fabs(x[i] - ref[i]);
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  worst = ref_max > 0 ? worst / ref_max : worst;
  if (!(worst <= tol))
    fprintf(stderr, "%s: normwise error %.3g at [%zu]: got %.17g, reference %.17g\n", what, worst,
            at, x[at], ref[at]);
  return worst;
}

#endif
