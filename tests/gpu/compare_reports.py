#!/usr/bin/env python3
"""Compares the analyses of two captures of the same model and prompt, one on
the GPU and one on the CPU (tests/gpu/kit_run.sh, step "capture"): every
number of summary.scores in the two report.json files (recall@k per score and
budget, Spearman correlations), with a tolerance, and exits 1 above it.

Why a tolerance and which: the two runtimes compute the same fp32 products in
another order, so K, V, Q, O differ by a few float32 ulps (gpu_runtime checks
that). A score or an oracle error changes by as much, which reorders only
tokens whose values are that close: a swap at the k-th place moves one
head's recall@k by 1/k, and the reported recall is a mean over every
(layer, head), so one swap in one head moves it by 1/(k * heads) -- 1/(40 * 8)
= 0.003 for the kit's model (2 layers of 4 heads). RECALL_TOLERANCE allows
about six such swaps (0.02); a real difference (a wrong K, a wrong mask) moves recall by
tenths. Spearman correlations over thousands of tokens move by far less than
one swap's 1/n; SPEARMAN_TOLERANCE is 0.01. (Two CPU captures of the kit's
model with fp32 and with stored-type weights, another summation order, gave
recall differences of 0 and Spearman differences up to 2.2e-4.)

usage: compare_reports.py GPU_REPORT CPU_REPORT
"""
import json
import sys

RECALL_TOLERANCE = 0.02
SPEARMAN_TOLERANCE = 0.01


def numbers(node, path=""):
    """(path, value) of every number under node."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from numbers(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from numbers(value, f"{path}[{i}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, float(node)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    gpu, cpu = (json.load(open(p))["summary"]["scores"] for p in sys.argv[1:])
    a, b = dict(numbers(gpu)), dict(numbers(cpu))
    if set(a) != set(b) or not a:
        sys.exit("the two reports do not hold the same scores and budgets")
    worst = {}
    for path in sorted(a):
        kind = "spearman" if "spearman" in path else "recall"
        diff = abs(a[path] - b[path])
        if diff > worst.get(kind, (-1.0, ""))[0]:
            worst[kind] = (diff, path)
    bad = False
    for kind, tolerance in (("recall", RECALL_TOLERANCE), ("spearman", SPEARMAN_TOLERANCE)):
        if kind not in worst:
            continue
        diff, path = worst[kind]
        ok = diff <= tolerance
        bad |= not ok
        print(f"{kind}: largest |gpu - cpu| {diff:.4g} at {path} ({a[path]:.6g} vs {b[path]:.6g}); "
              f"tolerance {tolerance}: {'ok' if ok else 'FAIL'}")
    print(f"{len(a)} numbers compared")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
