/* A branch-free exp(x) in double that the compiler can vectorise.
 *
 * glibc's exp() is a scalar call (without -ffast-math it is never vectorised),
 * and the fused score sweep evaluates one exponential per (row, token) pair, so
 * this header provides a straight-line replacement: Cody-Waite reduction
 * x = n ln2 + r with |r| <= ln2/2, a degree-13 Taylor polynomial for e^r
 * (truncation below 4e-18 relative) and the 2^n scale built from the bits of
 * the rounding constant. Accuracy: about 2 ulp over [-708, 709]; below -708 it
 * returns 0 (the true value is under 3e-308), above 709 +inf; NaN propagates. */
#ifndef OBC_FAST_EXP_H
#define OBC_FAST_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline double oracle_exp_fast(double x) {
  const double lowest = -708.0, highest = 709.0;
  /* 1.5 * 2^52: adding it rounds to an integer kept in the low mantissa bits. */
  const double shifter = 0x1.8p52;
  const double log2e = 0x1.71547652b82fep0;
  /* ln2 split so that n * ln2_hi is exact for |n| < 2^21 (fdlibm's constants). */
  const double ln2_hi = 0x1.62e42feep-1, ln2_lo = 0x1.a39ef35793c76p-33;
  double xc = x < lowest ? lowest : x;
  xc = xc > highest ? highest : xc;
  double t = xc * log2e + shifter;
  double n = t - shifter;
  double r = fma(-n, ln2_hi, xc);
  r = fma(-n, ln2_lo, r);
  /* e^r = sum r^k / k!, k = 0..13, by Horner. */
  double p = 1.0 / 6227020800.0;
  p = fma(p, r, 1.0 / 479001600.0);
  p = fma(p, r, 1.0 / 39916800.0);
  p = fma(p, r, 1.0 / 3628800.0);
  p = fma(p, r, 1.0 / 362880.0);
  p = fma(p, r, 1.0 / 40320.0);
  p = fma(p, r, 1.0 / 5040.0);
  p = fma(p, r, 1.0 / 720.0);
  p = fma(p, r, 1.0 / 120.0);
  p = fma(p, r, 1.0 / 24.0);
  p = fma(p, r, 1.0 / 6.0);
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  /* t's bit pattern is that of the shifter plus n: recover n as an integer
   * and place n + 1023 in the exponent field. */
  uint64_t bits; /* unsigned: wraps harmlessly when x is NaN */
  memcpy(&bits, &t, sizeof bits);
  bits = (bits - 0x4338000000000000ULL + 1023) << 52;
  double scale;
  memcpy(&scale, &bits, sizeof scale);
  double result = p * scale;
  result = x < lowest ? 0.0 : result;
  return x > highest ? HUGE_VAL : result;
}

#endif
