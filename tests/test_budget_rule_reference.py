#!/usr/bin/env python3
"""The budget counts of evict/policy.h (evict_budget_count and the counts
derived from it) against their definitions, written here in Python for
every n in 1..33000 at the budgets 10%, 20%, 30%, 40% and 50%:
  kvpress rule: compression_ratio cr is the Python float a kvpress user
    writes for the budget (0.9 for 10%); the count is kvpress's ScorerPress
    int(n * (1 - cr)), AdaKV's safeguard int(k * 0.2), CriticalKV's first
    stage int((1 - cr) * n * 0.5) and PyramidKV's get_layer_budget (window
    64, 30 layers; layers 0, 15 and 29, every 7th n), all in IEEE double;
  floor rule: floor(n * B) with B the exact decimal (fractions.Fraction),
    the safeguard k // 5, the first stage k // 2, and PyramidKV's shape
    with n x B in place of n * (1 - cr) and floor(n * B) where kvpress
    falls back to SnapKV.
Exact equality: counts are integers. Exits non-zero on any difference."""
import os
import subprocess
import sys
from fractions import Fraction

DUMP = os.environ["OBC_BUDGET_DUMP"]
N_MAX = 33000
WINDOW, LAYERS, STRIDE = 64, 30, 7
BETA = 20
# (budget as obcache takes it, compression_ratio as a kvpress user writes it)
BUDGETS = (("10%", 0.9), ("20%", 0.8), ("30%", 0.7), ("40%", 0.6), ("50%", 0.5))


def pyramid(n, layer, mean, fallback):
    """PyramidKV's layer budget for q_len n around a mean budget `mean`."""
    max_capacity = WINDOW + mean
    min_num = (max_capacity - WINDOW) / BETA
    max_num = (max_capacity - WINDOW) * 2 - min_num
    if max_num >= n - WINDOW:
        max_num = n - WINDOW
        min_num = (max_capacity - WINDOW) * 2 - max_num
    if not (n >= max_num >= min_num >= WINDOW):
        return fallback
    steps = (max_num - min_num) / (LAYERS - 1)
    return max(1, round(max_num - layer * steps))


def expected(rule, budget, cr, n):
    b = Fraction(budget.rstrip("%")) / 100
    if rule == "kvpress":
        k = int(n * (1 - cr))
        row = [n, k, int(k * 0.2), int((1 - cr) * n * 0.5)]
        mean, fallback = n * (1 - cr), max(1, round(n * (1 - cr)))
    else:
        k = int(n * b)  # floor of an exact rational
        row = [n, k, k // 5, k // 2]
        mean, fallback = float(n * b), max(1, k)
    if n % STRIDE or n <= WINDOW:
        return row + ["-"] * 3
    layers = (0, LAYERS // 2, LAYERS - 1)
    return row + [min(n, pyramid(n, layer, mean, fallback)) for layer in layers]


def main():
    failures = 0
    for rule in ("kvpress", "floor"):
        for budget, cr in BUDGETS:
            out = subprocess.run(
                [DUMP, rule, budget, str(N_MAX), str(WINDOW), str(LAYERS), str(STRIDE)],
                check=True, capture_output=True, text=True).stdout.split("\n")
            bad = 0
            for n in range(1, N_MAX + 1):
                want = " ".join(str(v) for v in expected(rule, budget, cr, n))
                if out[n - 1] != want:
                    bad += 1
                    if bad <= 5:
                        print(f"{rule} {budget} n={n}: obcache '{out[n - 1]}', expected '{want}'")
            fewer = sum(1 for n in range(1, N_MAX + 1)
                        if int(n * (1 - cr)) < int(n * Fraction(budget.rstrip('%')) / 100))
            print(f"{rule} {budget}: {N_MAX - bad} of {N_MAX} n agree "
                  f"(kvpress keeps one fewer than floor at {fewer} n)")
            failures += bad
    if failures:
        print(f"FAIL: {failures} differences")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
