#!/usr/bin/env python3
"""Writes a synthetic `obcache eval` folder: accuracy.csv, paired.csv,
recall.csv and samples.csv in the columns `obcache eval` writes, so that the
eval figures and index.html can be tested before and independently of a
real run. The outcomes are made up but shaped like real results (accuracy
grows with the budget, the "+obc" policies a little above their bases,
correct answers keep more of the oracle's tokens), per sample from a fixed
seed; every aggregate is computed from those samples with the textbook
formulas (Wilson, exact McNemar, a percentile bootstrap), so the files agree
with each other.

usage: eval_plots_fixture.py DIR
"""
import math
import os
import random
import sys
from fractions import Fraction

TASKS = ["niah_single_1", "niah_multikey_2", "vt", "cwe"]
LENGTHS = [4096]
SAMPLES = 24
BUDGETS = ["5%", "10%", "25%", "50%"]
POLICIES = ["snapkv", "snapkv+obc_k", "tova", "tova+obc_vk", "h2o"]
PROTOCOLS = ["agnostic"]
PAIRS = [("snapkv", "snapkv+obc_k"), ("tova", "tova+obc_vk")]
QUALITY = {"full": 1.0, "oracle@T": 0.97, "snapkv": 0.70, "snapkv+obc_k": 0.78,
           "tova": 0.62, "tova+obc_vk": 0.74, "h2o": 0.55}
DIFFICULTY = {"niah_single_1": 0.95, "niah_multikey_2": 0.8, "vt": 0.75, "cwe": 0.6}
Z95 = 1.959963984540054


def num(x):
    return "" if x is None else "%.9g" % x


def wilson(k, n):
    if n == 0:
        return 0.0, 1.0
    p, z2n = k / n, Z95 * Z95 / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = Z95 / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


def mcnemar(b, c):
    n, m = b + c, min(b, c)
    if n == 0:
        return 1.0
    return float(min(Fraction(1), 2 * Fraction(sum(math.comb(n, i) for i in range(m + 1)), 2 ** n)))


def bootstrap(x, y, rng, resamples=1000):
    d = [b - a for a, b in zip(x, y)]
    means = sorted(sum(rng.choice(d) for _ in d) / len(d) for _ in range(resamples))
    at = lambda q: means[min(len(means) - 1, int(q * (len(means) - 1)))]
    return at(0.025), at(0.975)


def auc(values, labels):
    pos = [v for v, l in zip(values, labels) if l]
    neg = [v for v, l in zip(values, labels) if not l]
    if not pos or not neg:
        return None
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def write_csv(path, header, rows):
    with open(path, "w") as f:
        f.write(header + "\n")
        for row in rows:
            f.write(",".join(r if isinstance(r, str) else num(r) for r in row) + "\n")


def simulate(rng):
    """samples[(task, length, sample, policy, budget, protocol)] = (correct, score, recall, kept)."""
    out = {}
    for task in TASKS:
        for length in LENGTHS:
            for s in range(SAMPLES):
                hard = rng.random()
                out[(task, length, s, "full", "", "")] = (int(hard < DIFFICULTY[task]), None, None, None)
                for budget in BUDGETS:
                    share = float(budget[:-1]) / 100
                    for protocol in PROTOCOLS:
                        for policy in ["oracle@T"] + POLICIES:
                            q = QUALITY[policy]
                            recall = None if policy == "oracle@T" else min(
                                1.0, max(0.0, q * (0.55 + 0.9 * share) + rng.uniform(-0.15, 0.15)))
                            chance = DIFFICULTY[task] * (q * (0.45 + 1.1 * share) if policy != "oracle@T"
                                                         else 0.9 + 0.1 * share)
                            if recall is not None:
                                chance *= 0.6 + 0.6 * recall
                            correct = int(hard < min(1.0, chance))
                            kept = int(length * share)
                            out[(task, length, s, policy, budget, protocol)] = (correct, None, recall, kept)
    return out


def main(folder):
    rng = random.Random(20261201)
    os.makedirs(folder, exist_ok=True)
    samples = simulate(rng)
    keys = sorted({(k[3], k[4], k[5]) for k in samples},
                  key=lambda k: (k[0] != "full", k[0] != "oracle@T", k[0], float(k[1][:-1] or 0), k[2]))
    accuracy, paired, sample_rows = [], [], []
    for task in TASKS + ["all"]:
        for length in LENGTHS:
            for policy, budget, protocol in keys:
                rows = [v for k, v in samples.items() if k[1] == length and (task == "all" or k[0] == task)
                        and (k[3], k[4], k[5]) == (policy, budget, protocol)]
                n, correct = len(rows), sum(r[0] for r in rows)
                low, high = wilson(correct, n)
                recalls = [r[2] for r in rows if r[2] is not None]
                recall = sum(recalls) / len(recalls) if recalls else None
                fraction = None if policy == "full" else float(budget[:-1]) / 100 * 0.98
                # 0/1 outcomes and equal samples per task: RULER's score (the
                # mean of the task means) is the accuracy; the Wilson bounds
                # stand in for its bootstrap interval
                accuracy.append([task, str(length), policy, budget, protocol, n, correct, correct / n,
                                 low, high, correct / n, low, high, recall, fraction])
            for baseline, better in PAIRS:
                for budget in BUDGETS:
                    for protocol in PROTOCOLS:
                        x, y = [], []
                        for s_task in (TASKS if task == "all" else [task]):
                            for s in range(SAMPLES):
                                x.append(samples[(s_task, length, s, baseline, budget, protocol)][0])
                                y.append(samples[(s_task, length, s, better, budget, protocol)][0])
                        b = sum(1 for a, c in zip(x, y) if a and not c)
                        c = sum(1 for a, c2 in zip(x, y) if c2 and not a)
                        low, high = bootstrap(x, y, rng)
                        # on 0/1 outcomes the sign-flip p is McNemar's
                        d = (sum(y) - sum(x)) / len(x)
                        paired.append([task, str(length), baseline, better, budget, protocol, len(x),
                                       sum(x), sum(y), b, c, d, low, high, mcnemar(b, c),
                                       sum(x) / len(x), sum(y) / len(y), d, low, high, mcnemar(b, c)])
    for (task, length, s, policy, budget, protocol), (correct, _, recall, kept) in sorted(
            samples.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][3], kv[0][4])):
        answer = '"The answer is ""%s""\\nand more"' % ("1234567" if correct else "0000000")
        sample_rows.append([task, str(length), str(s), str(1000 + s), str(length), policy, budget,
                            protocol, "" if kept is None else str(kept), str(correct), num(correct),
                            num(recall), answer])
    recall_rows = []
    for group in ["all"] + BUDGETS:
        rows = sorted((v[2], v[0]) for k, v in samples.items()
                      if v[2] is not None and (group == "all" or k[4] == group))
        value_auc = auc([r[0] for r in rows], [r[1] for r in rows])
        for q in range(4):
            part = rows[q * len(rows) // 4:(q + 1) * len(rows) // 4]
            n, correct = len(part), sum(r[1] for r in part)
            low, high = wilson(correct, n)
            recall_rows.append([group, str(q + 1), part[0][0], part[-1][0], n, correct, correct / n,
                                low, high, value_auc])
    write_csv(os.path.join(folder, "accuracy.csv"),
              "task,length,policy,budget,protocol,n,correct,accuracy,ci_low,ci_high,score,score_ci_low,"
              "score_ci_high,recall,fraction",
              accuracy)
    write_csv(os.path.join(folder, "paired.csv"),
              "task,length,baseline,paired,budget,protocol,n,baseline_correct,paired_correct,"
              "baseline_only,paired_only,difference,ci_low,ci_high,mcnemar_p,baseline_score,paired_score,"
              "score_difference,score_ci_low,score_ci_high,sign_flip_p", paired)
    write_csv(os.path.join(folder, "recall.csv"),
              "budget,quartile,recall_low,recall_high,n,correct,accuracy,ci_low,ci_high,auc",
              recall_rows)
    write_csv(os.path.join(folder, "samples.csv"),
              "task,length,sample,seed,tokens,policy,budget,protocol,kept,correct,score,recall,answer",
              sample_rows)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
