#!/usr/bin/env python3
"""Independent reference values for eval/stats.h, from textbook formulas in
plain Python (math, fractions; no numpy or scipy), written as the C header
tests/eval_stats_expected.h that tests/test_eval_stats.c includes.

- Wilson: the two roots of the quadratic (p - q)^2 = z^2 q (1 - q) / n in q,
  i.e. (1 + z^2/n) q^2 - (2p + z^2/n) q + p^2 = 0, by the quadratic formula
  (not the centre/half-width form eval/stats.c uses).
- McNemar exact: 2 * sum_{i <= min(b, c)} C(b + c, i) / 2^(b + c) in exact
  fractions, capped at 1.
- Paired bootstrap: the draw rule of eval/stats.h replayed with a Python
  splitmix64 (prompts/niah_random.c): resample r takes n indices
  below(n) in order from one stream seeded once; below(n) rejects draws
  >= 2^64 - 1 - (2^64 - 1) mod n and returns x mod n. The mean is the
  left-to-right float sum of the drawn y - x divided by n; the interval is
  the linearly interpolated (type 7) quantile of the sorted means.
- RULER's score over tasks: the mean of the task means; its stratified
  bootstrap replays the draw rule of eval/stats.h (per resample, task by task,
  as many below(count) draws among the task's values as it holds).
- Sign-flip p: every one of the 2^m sign assignments of the m non-zero
  differences enumerated with itertools.product, sums in exact fractions
  (so ties are exact); the Monte Carlo form replays the draw rule of
  eval/stats.h (one splitmix64 draw per non-zero difference, negated when
  its top bit is set; (1 + hits) / (1 + resamples)).
- McNemar power: every outcome (b, c, rest) of the n pairs enumerated with
  its trinomial probability n! / (b! c! rest!) p10^b p01^c (1 - psi)^rest,
  p10 = (psi - delta) / 2, p01 = (psi + delta) / 2, summed where the exact
  McNemar p above is <= alpha (not the conditional decomposition
  eval/stats.c uses); the minimum detectable difference by bisection of
  that power; Connor's sample size from statistics.NormalDist's quantiles.
- Holm: the textbook step-down, min(1, (n - j) p_(j)) made monotone.
- AUC: every (positive, negative) pair counted, 1 for a win, 1/2 for a tie,
  in fractions.
- Matches: RULER's string_match_all / string_match_part expressions
  (scripts/eval/synthetic/constants.py) for one prediction, without the
  *100 and rounding.

usage: eval_stats_reference.py            print the header
       eval_stats_reference.py --check H  exit 1 unless H is what it prints
"""
import itertools
import math
import sys
from fractions import Fraction

Z95 = 1.959963984540054
MASK = (1 << 64) - 1


def wilson(k, n, z):
    if n == 0:
        return 0.0, 1.0
    p = k / n
    a = 1 + z * z / n
    b = -(2 * p + z * z / n)
    c = p * p
    root = math.sqrt(max(0.0, b * b - 4 * a * c))
    return max(0.0, (-b - root) / (2 * a)), min(1.0, (-b + root) / (2 * a))


def mcnemar(b, c):
    n, m = b + c, min(b, c)
    if n == 0:
        return 1.0
    tail = Fraction(sum(math.comb(n, i) for i in range(m + 1)), 2 ** n)
    return float(min(Fraction(1), 2 * tail))


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        limit = MASK - MASK % n
        while True:
            x = self.next()
            if x < limit:
                return x % n


def quantile(sorted_values, q):
    h = q * (len(sorted_values) - 1)
    lo = math.floor(h)
    if lo + 1 >= len(sorted_values):
        return sorted_values[-1]
    return sorted_values[lo] + (h - lo) * (sorted_values[lo + 1] - sorted_values[lo])


def bootstrap(x, y, resamples, level, seed):
    n = len(x)
    d = [b - a for a, b in zip(x, y)]
    rng = SplitMix64(seed)
    means = []
    for _ in range(resamples):
        s = 0.0
        for _ in range(n):
            s += d[rng.below(n)]
        means.append(s / n)
    means.sort()
    return quantile(means, (1 - level) / 2), quantile(means, (1 + level) / 2)


def auc(values, labels):
    pos = [v for v, l in zip(values, labels) if l]
    neg = [v for v, l in zip(values, labels) if not l]
    if not pos or not neg:
        return math.nan
    wins = sum(Fraction(1) if p > q else Fraction(1, 2) if p == q else Fraction(0)
               for p in pos for q in neg)
    return float(wins / (len(pos) * len(neg)))


def stratified_mean(x, strata):
    groups = {}
    for v, k in zip(x, strata):
        groups.setdefault(k, []).append(v)
    means = [sum(groups[k]) / len(groups[k]) for k in sorted(groups)]
    return sum(means) / len(means)


def stratified_bootstrap(x, strata, resamples, level, seed):
    groups = {}
    for v, k in zip(x, strata):
        groups.setdefault(k, []).append(v)
    rng = SplitMix64(seed)
    means = []
    for _ in range(resamples):
        total = 0.0
        for k in sorted(groups):
            g = groups[k]
            s = 0.0
            for _ in range(len(g)):
                s += g[rng.below(len(g))]
            total += s / len(g)
        means.append(total / len(groups))
    means.sort()
    return quantile(means, (1 - level) / 2), quantile(means, (1 + level) / 2)


def sign_flip_exact(d):
    v = [Fraction(x) for x in d if x != 0]
    if not v:
        return 1.0
    observed = abs(sum(v))
    hits = sum(1 for signs in itertools.product((1, -1), repeat=len(v))
               if abs(sum(s * x for s, x in zip(signs, v))) >= observed)
    return hits / 2 ** len(v)


def sign_flip_monte_carlo(d, resamples, seed):
    v = [x for x in d if x != 0]
    reach = abs(sum(v)) - 1e-9 * sum(abs(x) for x in v)
    rng = SplitMix64(seed)
    hits = 0
    for _ in range(resamples):
        s = 0.0
        for x in v:
            s += -x if rng.next() >> 63 else x
        hits += abs(s) >= reach
    return (1 + hits) / (1 + resamples)


def mcnemar_rejects(n, alpha):
    """The outcomes (b, c) with b + c <= n whose exact McNemar p is <= alpha."""
    rejects, cache = [], {}
    for b in range(n + 1):
        for c in range(n + 1 - b):
            key = (b + c, min(b, c))
            if key not in cache:
                cache[key] = mcnemar(b, c) <= alpha
            if cache[key]:
                rejects.append((b, c))
    return rejects


def mcnemar_power(n, psi, delta, rejects):
    p10, p01, rest = (psi - delta) / 2, (psi + delta) / 2, 1 - psi
    total = 0.0
    for b, c in rejects:
        ways = math.comb(n, b) * math.comb(n - b, c)
        total += ways * p10 ** b * p01 ** c * rest ** (n - b - c)
    return min(1.0, total)


def mcnemar_mde(n, psi, alpha, power):
    rejects = mcnemar_rejects(n, alpha)
    if mcnemar_power(n, psi, psi, rejects) < power:
        return float("nan")
    lo, hi = 0.0, psi
    while hi - lo > 1e-10:
        mid = (lo + hi) / 2
        if mcnemar_power(n, psi, mid, rejects) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def connor_samples(psi, delta):
    from statistics import NormalDist
    za, zb = NormalDist().inv_cdf(0.975), NormalDist().inv_cdf(0.8)
    return ((za * math.sqrt(psi) + zb * math.sqrt(psi - delta * delta)) / delta) ** 2


def holm(ps):
    order = sorted(range(len(ps)), key=lambda i: (ps[i], i))
    out, running = [0.0] * len(ps), 0.0
    for j, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - j) * ps[i]))
        out[i] = running
    return out


def match_all(pred, refs):
    return sum([1.0 if r.lower() in pred.lower() else 0.0 for r in refs]) / len(refs)


def match_part(pred, refs):
    return max([1.0 if r.lower() in pred.lower() else 0.0 for r in refs])


# Inputs shared with the C test (written into the header too).
BOOT_TINY_X = [0.0, 1.0, 1.0, 0.0, 1.0]
BOOT_TINY_Y = [1.0, 1.0, 0.0, 1.0, 1.0]
BOOT_TINY = (7, 0.9, 42)  # resamples, level, seed
BOOT_LARGE_SEED = 20261201
BOOT_LARGE = (1000, 0.95, 7)
AUC_HAND = ([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
AUC_TIES = ([0.5, 0.5, 0.2, 0.9, 0.5, 0.2], [1, 0, 0, 1, 1, 1])
MATCHES = [
    ("three_refs", "The numbers are 1234 and 5678.", ["1234", "5678", "9999"]),
    ("case", "The capital is PARIS", ["paris", "Lyon"]),
    ("none", "no idea", ["42", "43"]),
    ("empty_ref", "anything", ["", "zzz"]),
]
# RULER scores (string_match_all) of 11 answers in 3 tasks, and paired score
# differences: a few exact-enumeration cases (ties of equal sums included)
# and one Monte Carlo case (20 non-zero differences).
SCORE_X = [1.0, 0.5, 0.75, 1.0, 0.0, 1.0, 0.25, 0.5, 1.0, 1.0, 0.0]
SCORE_TASK = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
SCORE_BOOT = (2000, 0.95, 11)
SIGN_FLIP = [
    ("partial", [0.5, -0.25, 0.0, 0.75, 0.5, 1.0, -0.5, 0.25]),
    ("ties", [1.0, -1.0, 0.5, 0.5, -0.5, 0.0]),
    ("zero", [0.0, 0.0, 0.0]),
    ("sixteen", [0.25 * ((i * 7) % 5 - 1) + (0.5 if i % 3 == 0 else 0.0) for i in range(16)]),
]
SIGN_FLIP_MC = ([0.25 * ((i * 5) % 7 - 2) + 0.125 for i in range(20)], 3000, 5)
MCNEMAR = [(0, 0), (0, 5), (5, 0), (1, 9), (9, 1), (10, 25), (25, 10), (7, 7),
           (980, 1020), (900, 1100), (1100, 900), (0, 2000)]
WILSON = [(0, 10), (10, 10), (5, 10), (81, 263), (0, 0)]
# (n, psi, delta) at alpha 0.05; the size (delta 0) must stay below alpha.
POWER = [(30, 0.3, 0.2), (60, 0.2, 0.1), (60, 0.5, 0.0), (200, 0.15, 0.08),
         (200, 0.1, -0.05), (40, 1.0, 0.5), (25, 0.4, 0.4)]
MDE = [(60, 0.2), (200, 0.15), (200, 0.05), (120, 0.6)]  # 80% power, alpha 0.05
CONNOR = [(0.2, 0.05), (0.1, 0.1), (0.35, 0.03)]
HOLM = [0.01, 0.04, 0.03, 0.005, 0.04, 0.6]


def large_bootstrap_inputs():
    """40 paired 0/1 outcomes, y right more often than x, from a fixed seed."""
    rng = SplitMix64(BOOT_LARGE_SEED)
    x = [float(rng.below(100) < 55) for _ in range(40)]
    y = [float(rng.below(100) < 70) for _ in range(40)]
    return x, y


def header():
    values = []
    for k, n in WILSON:
        lo, hi = wilson(k, n, Z95)
        values += [("wilson_low_%d_%d" % (k, n), lo), ("wilson_high_%d_%d" % (k, n), hi)]
    for b, c in MCNEMAR:
        values.append(("mcnemar_%d_%d" % (b, c), mcnemar(b, c)))
    lo, hi = bootstrap(BOOT_TINY_X, BOOT_TINY_Y, *BOOT_TINY)
    values += [("bootstrap_tiny_low", lo), ("bootstrap_tiny_high", hi)]
    bx, by = large_bootstrap_inputs()
    lo, hi = bootstrap(bx, by, *BOOT_LARGE)
    values += [("bootstrap_large_low", lo), ("bootstrap_large_high", hi),
               ("bootstrap_large_mean", (sum(by) - sum(bx)) / len(bx))]
    values.append(("score_mean", stratified_mean(SCORE_X, SCORE_TASK)))
    values.append(("score_mean_pooled", stratified_mean(SCORE_X, [0] * len(SCORE_X))))
    lo, hi = stratified_bootstrap(SCORE_X, SCORE_TASK, *SCORE_BOOT)
    values += [("score_boot_low", lo), ("score_boot_high", hi)]
    lo, hi = stratified_bootstrap(SCORE_X, [0] * len(SCORE_X), *SCORE_BOOT)
    values += [("score_boot_pooled_low", lo), ("score_boot_pooled_high", hi)]
    for name, d in SIGN_FLIP:
        values.append(("sign_flip_" + name, sign_flip_exact(d)))
    values.append(("sign_flip_mc", sign_flip_monte_carlo(*SIGN_FLIP_MC)))
    values += [("auc_hand", auc(*AUC_HAND)), ("auc_ties", auc(*AUC_TIES))]
    for i, (n, psi, delta) in enumerate(POWER):
        values.append(("power_%d" % i, mcnemar_power(n, psi, delta, mcnemar_rejects(n, 0.05))))
    for i, (n, psi) in enumerate(MDE):
        values.append(("mde_%d" % i, mcnemar_mde(n, psi, 0.05, 0.8)))
    for i, (psi, delta) in enumerate(CONNOR):
        values.append(("connor_%d" % i, connor_samples(psi, delta)))
    for i, p in enumerate(holm(HOLM)):
        values.append(("holm_%d" % i, p))
    for name, pred, refs in MATCHES:
        values += [("match_all_" + name, match_all(pred, refs)),
                   ("match_part_" + name, match_part(pred, refs))]

    def doubles(name, xs):
        return "static const double %s[] = {%s};\n" % (name, ", ".join(repr(v) for v in xs))

    def strings(xs):
        return "{" + ", ".join('"%s"' % s for s in xs) + "}"

    out = ["/* Generated by tests/eval_stats_reference.py (the independent reference\n",
           " * values of eval/stats.h); regenerate with\n",
           " *   python3 tests/eval_stats_reference.py > tests/eval_stats_expected.h */\n",
           "#ifndef OBC_EVAL_STATS_EXPECTED_H\n#define OBC_EVAL_STATS_EXPECTED_H\n\n",
           "/* As printed (eval_stats_fixture compares it byte for byte). */\n",
           "// clang-format off\n",
           "#include <stddef.h>\n\n"]
    out.append(doubles("BOOT_TINY_X", BOOT_TINY_X))
    out.append(doubles("BOOT_TINY_Y", BOOT_TINY_Y))
    out.append("enum { BOOT_TINY_RESAMPLES = %d };\n" % BOOT_TINY[0])
    out.append("#define BOOT_TINY_LEVEL %r\n#define BOOT_TINY_SEED %duLL\n" % BOOT_TINY[1:])
    out.append(doubles("BOOT_LARGE_X", bx))
    out.append(doubles("BOOT_LARGE_Y", by))
    out.append("enum { BOOT_LARGE_RESAMPLES = %d };\n" % BOOT_LARGE[0])
    out.append("#define BOOT_LARGE_LEVEL %r\n#define BOOT_LARGE_SEED %duLL\n" % BOOT_LARGE[1:])
    out.append(doubles("SCORE_X", SCORE_X))
    out.append("static const size_t SCORE_TASK[] = {%s};\n" % ", ".join(str(k) for k in SCORE_TASK))
    out.append("enum { SCORE_BOOT_RESAMPLES = %d };\n" % SCORE_BOOT[0])
    out.append("#define SCORE_BOOT_LEVEL %r\n#define SCORE_BOOT_SEED %duLL\n" % SCORE_BOOT[1:])
    for name, d in SIGN_FLIP:
        out.append(doubles("SIGN_FLIP_" + name.upper(), d))
    out.append(doubles("SIGN_FLIP_MC", SIGN_FLIP_MC[0]))
    out.append("enum { SIGN_FLIP_MC_RESAMPLES = %d };\n#define SIGN_FLIP_MC_SEED %duLL\n"
               % SIGN_FLIP_MC[1:])
    out.append("static const double POWER_CASES[][3] = {%s};\n"
               % ", ".join("{%d, %r, %r}" % c for c in POWER))
    out.append("static const double MDE_CASES[][2] = {%s};\n"
               % ", ".join("{%d, %r}" % c for c in MDE))
    out.append("static const double CONNOR_CASES[][2] = {%s};\n"
               % ", ".join("{%r, %r}" % c for c in CONNOR))
    out.append(doubles("HOLM_P", HOLM))
    for name, (v, l) in (("AUC_HAND", AUC_HAND), ("AUC_TIES", AUC_TIES)):
        out.append(doubles(name + "_VALUE", v))
        out.append("static const unsigned char %s_LABEL[] = {%s};\n"
                   % (name, ", ".join(str(x) for x in l)))
    out.append("\ntypedef struct {\n  const char *name, *pred;\n  const char *refs[4];\n"
               "  size_t n_refs;\n} EvalMatchCase;\n")
    out.append("static const EvalMatchCase MATCH_CASES[] = {\n")
    for name, pred, refs in MATCHES:
        out.append('    {"%s", "%s", %s, %d},\n' % (name, pred, strings(refs), len(refs)))
    out.append("};\n\ntypedef struct {\n  const char *name;\n  double value;\n} EvalExpected;\n")
    out.append("static const EvalExpected EVAL_EXPECTED[] = {\n")
    for name, v in values:
        out.append('    {"%s", %r},\n' % (name, v))
    out.append("};\n// clang-format on\n\n#endif\n")
    return "".join(out)


if __name__ == "__main__":
    text = header()
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        with open(sys.argv[2]) as f:
            if f.read() != text:
                print("%s: differs from what tests/eval_stats_reference.py prints; regenerate it"
                      % sys.argv[2], file=sys.stderr)
                sys.exit(1)
        print("%s: up to date" % sys.argv[2])
    elif len(sys.argv) == 1:
        sys.stdout.write(text)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
