/* Per-pair closed forms (docs/SCIENCE.md, "Approximate scores" and "Exact
 * errors over the window"): the contribution of one (query row i, token p) pair
 * of one query head to each Taylor score and each exact error, in O(1) once a
 * few dot products are known.
 *
 * Inputs of a pair: a = A_ip = exp(z - lse_i) (never exp(z)/sum), z = z_ip,
 * e = exp(-lse_i) (the weight a zeroed logit would get), one_minus_a = 1 - A_ip,
 * and four scalars about v = v_p and o = o_i:
 *   vv = ||v||^2, oo = ||o||^2, dd = ||v - o||^2, vd = v.(v - o).
 * dd and vd come from vo = v.o (dd = vv - 2 vo + oo, vd = vv - vo,
 * oracle_pair_norms_from_dots), and a, e from the stored lse. That is accurate
 * for A_ip <= 1/2 only: above it (at most one pair per row) 1 - A and v - o
 * fall below the rounding of the stored lse and O, and oracle/dominant.h
 * recomputes the pair from q, K, V (docs/SCIENCE.md). Shared by oracle/ and
 * the fused window sweep of scores/. */
#ifndef OBC_EXACT_FORMS_H
#define OBC_EXACT_FORMS_H

#include <math.h>
#include <stddef.h>

/* 1 - A below this (relative to 1) means the row has a single live key to
 * working precision: o = v_p and the perturbed outputs are known exactly
 * (zero key: o' = v_p = o; zero both / remove: o' = 0, error ||o||^2). The
 * formulas would divide rounding noise by (1 - A)^2 there. */
#define OBC_ONE_MINUS_A_MIN 1e-12

/* dd = ||v - o||^2 and vd = v.(v - o) from vv, vo = v.o, oo. */
static inline void oracle_pair_norms_from_dots(double vv, double vo, double oo, double *dd,
                                               double *vd) {
  *dd = vv - 2.0 * vo + oo;
  *vd = vv - vo;
}

/* obc_v = exact_v: zeroing v gives o' - o = -A v, so A^2 ||v||^2. */
static inline double oracle_form_obc_v(double a, double vv) { return a * a * vv; }

/* obc_k: (A z)^2 ||v - o||^2. */
static inline double oracle_form_obc_k(double a, double z, double dd) {
  double az = a * z;
  return az * az * dd;
}

/* The cross term of obc_vk: 2 A^2 z (||v||^2 - v.o) = 2 A^2 z v.(v - o). */
static inline double oracle_form_obc_vk_cross(double a, double z, double vd) {
  return 2.0 * a * a * z * vd;
}

/* 1 when the row has a single live key to working precision (1 - A below
 * OBC_ONE_MINUS_A_MIN): the forms below are then replaced by their limits
 * (oracle_pair_forms). */
static inline int oracle_pair_single_key(double one_minus_a) {
  return !(one_minus_a > OBC_ONE_MINUS_A_MIN);
}

/* The two reciprocals of the exact forms with one division:
 * r = 1/(1 - A + e) and inv_live = 1/(1 - A), with 1 - A clamped at
 * OBC_ONE_MINUS_A_MIN so both stay finite (for lse > -700). */
static inline void oracle_pair_reciprocals(double one_minus_a, double e, double *r,
                                           double *inv_live) {
  double live = one_minus_a > OBC_ONE_MINUS_A_MIN ? one_minus_a : OBC_ONE_MINUS_A_MIN;
  double inv = 1.0 / (live * (live + e));
  *r = live * inv;
  *inv_live = (live + e) * inv;
}

/* exact_k: with r = 1/(1 - A + e), o' = r(o - A v) + r e v, so
 * o' - o = (r - 1) o - r (A - e) v = r (A - e)(o - v) because r - 1 = r (A - e):
 * error r^2 (A - e)^2 ||v - o||^2 (single live key: o' = v = o, error 0).
 * A - e is a plain subtraction: its rounding is eps * max(A, e), so the
 * relative error of the term is about eps / |z| (the term itself vanishes as
 * z^2 when z -> 0). */
static inline double oracle_form_exact_k(double a, double e, double r, double dd) {
  double t = (a - e) * r;
  return t * t * dd;
}

/* exact_vk: o' = r (o - A v), o' - o = r ((A - e) o - A v) = -r (A (v - o) + e o):
 * error r^2 (A^2 ||v - o||^2 + 2 A e (v - o).o + e^2 ||o||^2), with
 * (v - o).o = vd - dd (single live key: o' = 0, error ||o||^2). */
static inline double oracle_form_exact_vk(double a, double e, double r, double oo, double dd,
                                          double vd) {
  return r * r * (a * a * dd + 2.0 * a * e * (vd - dd) + e * e * oo);
}

/* remove: o' = (o - A v)/(1 - A), o' - o = A (o - v)/(1 - A): error
 * (A / (1 - A))^2 ||v - o||^2 (single live key: the whole output is lost,
 * error ||o||^2, never inf/NaN). */
static inline double oracle_form_remove(double a, double inv_live, double dd) {
  double t = a * inv_live;
  return t * t * dd;
}

/* Every per-pair quantity of one (row, token) pair. */
typedef struct {
  double attn;  /* A */
  double attn2; /* A^2 */
  double obc_v; /* = exact_v */
  double obc_k;
  double obc_vk; /* obc_v + obc_k + cross term */
  double exact_k;
  double exact_vk;
  double remove;
} OraclePairForms;

/* All forms of one pair from its scalars. */
static inline void oracle_pair_forms(double a, double z, double e, double one_minus_a, double vv,
                                     double oo, double dd, double vd, OraclePairForms *f) {
  f->attn = a;
  f->attn2 = a * a;
  f->obc_v = oracle_form_obc_v(a, vv);
  f->obc_k = oracle_form_obc_k(a, z, dd);
  f->obc_vk = f->obc_v + f->obc_k + oracle_form_obc_vk_cross(a, z, vd);
  double r, inv_live;
  oracle_pair_reciprocals(one_minus_a, e, &r, &inv_live);
  int single = oracle_pair_single_key(one_minus_a);
  f->exact_k = single ? 0.0 : oracle_form_exact_k(a, e, r, dd);
  f->exact_vk = single ? oo : oracle_form_exact_vk(a, e, r, oo, dd, vd);
  f->remove = single ? oo : oracle_form_remove(a, inv_live, dd);
}

/* All forms of a pair with A <= 1/2 from its GEMM outputs z and vo and the
 * row's stored lse (e = exp(-lse)): 1 - A is then accurate as a plain
 * subtraction and dd, vd from the dots lose little. The pair with A > 1/2
 * takes oracle/dominant.h instead. */
static inline void oracle_pair_forms_below_half(double z, double vv, double vo, double oo,
                                                double lse, double e, OraclePairForms *f) {
  double a = exp(z - lse), dd, vd;
  oracle_pair_norms_from_dots(vv, vo, oo, &dd, &vd);
  oracle_pair_forms(a, z, e, 1.0 - a, vv, oo, dd, vd, f);
}

#endif
