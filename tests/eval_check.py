#!/usr/bin/env python3
"""Independent check of an eval folder's tables (`obcache eval`): recomputes
accuracy.csv, paired.csv and recall.csv from samples.csv with textbook
formulas (Wilson's interval, the exact binomial McNemar test, the
Mann-Whitney AUC, quartiles by rank, RULER's score as the mean of the task
means, the sign-flip p by enumerating every sign assignment, the McNemar
test's power by enumerating every outcome and its minimum detectable
difference by bisection, Holm's step-down) and compares
them field by field; the bootstrap intervals are only checked to be
intervals around their estimates (their resampling is tested in
tests/test_eval_stats.c), a Monte Carlo sign-flip p (over 16 non-zero
differences) only to be a probability.

usage: eval_check.py DIR TASK,.. POLICY,.. BUDGET,.. PROTOCOL,..
Prints one line per failed check and exits 1 when any failed."""
import csv
import itertools
import math
import sys

from eval_stats_reference import holm  # the textbook step-down, shared

Z = 1.959963984540054
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def close(a, b, tol=2e-6):
    return abs(float(a) - float(b)) <= tol


def wilson(k, n):
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + Z * Z / n
    centre = (p + Z * Z / (2 * n)) / denom
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar(b, c):
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def mde80(n, psi):
    """The smallest difference in (0, psi] that the exact McNemar test at
    alpha 0.05 detects with 80% power among n pairs of discordance psi: the
    power summed over every outcome (b, c, rest) with its trinomial
    probability, bisected; NaN when even psi falls short."""
    rejects = [(b, c) for b in range(n + 1) for c in range(n + 1 - b) if mcnemar(b, c) <= 0.05]

    def power(delta):
        p10, p01 = (psi - delta) / 2, (psi + delta) / 2
        return sum(math.comb(n, b) * math.comb(n - b, c) * p10 ** b * p01 ** c
                   * (1 - psi) ** (n - b - c) for b, c in rejects)

    if psi == 0 or power(psi) < 0.8:
        return math.nan
    lo, hi = 0.0, psi
    while hi - lo > 1e-10:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if power(mid) >= 0.8 else (mid, hi)
    return hi


def task_mean(pairs):
    """RULER's average: the mean over tasks of each task's mean (pairs of
    (task, value))."""
    by_task = {}
    for t, v in pairs:
        by_task.setdefault(t, []).append(v)
    return sum(sum(v) / len(v) for v in by_task.values()) / len(by_task)


def sign_flip(d):
    """Two-sided sign-flip p by enumeration; None beyond 16 non-zero values."""
    v = [x for x in d if x != 0]
    if len(v) > 16:
        return None
    if not v:
        return 1.0
    observed = abs(sum(v)) - 1e-9 * sum(abs(x) for x in v)
    hits = sum(1 for signs in itertools.product((1, -1), repeat=len(v))
               if abs(sum(s * x for s, x in zip(signs, v))) >= observed)
    return hits / 2 ** len(v)


def auc(points):
    pos = [r for r, y in points if y]
    neg = [r for r, y in points if not y]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    folder, tasks, policies, budgets, protocols = sys.argv[1:6]
    tasks, policies = tasks.split(","), policies.split(",") + ["oracle@T"]
    budgets, protocols = budgets.split(","), protocols.split(",")
    samples = read(f"{folder}/samples.csv")
    accuracy = read(f"{folder}/accuracy.csv")
    paired = read(f"{folder}/paired.csv")
    recall = read(f"{folder}/recall.csv")
    lengths = sorted({r["length"] for r in samples}, key=int)

    def rows(task, length, policy, budget, protocol):
        return [r for r in samples
                if (task == "all" or r["task"] == task) and r["length"] == length
                and r["policy"] == policy and r["budget"] == budget and r["protocol"] == protocol]

    # accuracy.csv: every (task or all, length, policy, budget, protocol), full first.
    expected = []
    for task in tasks + ["all"]:
        for length in lengths:
            expected.append((task, length, "full", "", ""))
            for protocol in protocols:
                for policy in policies:
                    for budget in budgets:
                        expected.append((task, length, policy, budget, protocol))
    got = [(r["task"], r["length"], r["policy"], r["budget"], r["protocol"]) for r in accuracy]
    check(got == expected, f"accuracy.csv rows {got[:3]}... expected {expected[:3]}...")
    for r in accuracy:
        sel = rows(r["task"], r["length"], r["policy"], r["budget"], r["protocol"])
        n, k = len(sel), sum(int(s["correct"]) for s in sel)
        name = f'accuracy.csv {r["task"]} {r["policy"]} {r["budget"]} {r["protocol"]}'
        check(int(r["n"]) == n and int(r["correct"]) == k, f"{name}: n/correct {r['n']}/{r['correct']} != {n}/{k}")
        if n:
            low, high = wilson(k, n)
            check(close(r["accuracy"], k / n), f"{name}: accuracy {r['accuracy']} != {k / n}")
            check(close(r["ci_low"], low) and close(r["ci_high"], high),
                  f"{name}: Wilson [{r['ci_low']}, {r['ci_high']}] != [{low:.6f}, {high:.6f}]")
            check(float(r["ci_low"]) <= float(r["accuracy"]) <= float(r["ci_high"]), f"{name}: interval")
            score = task_mean([(s["task"], float(s["score"])) for s in sel])
            check(close(r["score"], score, 1e-5), f"{name}: score {r['score']} != {score}")
            check(float(r["score_ci_low"]) <= float(r["score"]) + 1e-9
                  and float(r["score"]) - 1e-9 <= float(r["score_ci_high"]),
                  f"{name}: score interval [{r['score_ci_low']}, {r['score_ci_high']}]")
            check(0 <= float(r["score_ci_low"]) and float(r["score_ci_high"]) <= 1, f"{name}: score in 0..1")
            rec = [float(s["recall"]) for s in sel if s["recall"] != ""]
            check((r["recall"] == "") == (not rec), f"{name}: recall present")
            if rec:
                check(close(r["recall"], sum(rec) / len(rec), 1e-5), f"{name}: mean recall")
            check(r["recall"] == "" or r["policy"] not in ("full", "oracle@T"), f"{name}: recall of the reference")

    # paired.csv: every X vs X+obc_S of the policies.
    pairs = [(p.split("+obc_")[0], p) for p in policies if "+obc_" in p and p.split("+obc_")[0] in policies]
    expected = [(t, l, b, p, bu, pr) for t in tasks + ["all"] for l in lengths for b, p in pairs
                for pr in protocols for bu in budgets]
    got = [(r["task"], r["length"], r["baseline"], r["paired"], r["budget"], r["protocol"]) for r in paired]
    check(got == expected, f"paired.csv rows {got[:2]} expected {expected[:2]}")
    for r in paired:
        x = rows(r["task"], r["length"], r["baseline"], r["budget"], r["protocol"])
        y = rows(r["task"], r["length"], r["paired"], r["budget"], r["protocol"])
        key = lambda s: (s["task"], s["length"], s["sample"])
        ys = {key(s): int(s["correct"]) for s in y}
        both = [(int(s["correct"]), ys[key(s)]) for s in x]
        b = sum(1 for u, v in both if u and not v)
        c = sum(1 for u, v in both if v and not u)
        name = f'paired.csv {r["task"]} {r["paired"]} {r["budget"]}'
        check(int(r["n"]) == len(both) and int(r["baseline_only"]) == b and int(r["paired_only"]) == c,
              f"{name}: counts")
        d = (sum(v for _, v in both) - sum(u for u, _ in both)) / len(both)
        check(close(r["difference"], d), f"{name}: difference {r['difference']} != {d}")
        check(float(r["ci_low"]) <= d + 1e-9 and d - 1e-9 <= float(r["ci_high"]), f"{name}: interval")
        check(math.isclose(float(r["mcnemar_p"]), mcnemar(b, c), rel_tol=1e-4),
              f"{name}: McNemar {r['mcnemar_p']} != {mcnemar(b, c)}")
        ys = {key(s): float(s["score"]) for s in y}
        scored = [(s["task"], float(s["score"]), ys[key(s)]) for s in x]
        base = task_mean([(t, u) for t, u, _ in scored])
        pair = task_mean([(t, v) for t, _, v in scored])
        check(close(r["baseline_score"], base, 1e-5) and close(r["paired_score"], pair, 1e-5),
              f"{name}: scores {r['baseline_score']}, {r['paired_score']} != {base}, {pair}")
        check(close(r["score_difference"], pair - base, 1e-5), f"{name}: score difference")
        check(float(r["score_ci_low"]) <= pair - base + 1e-9 <= float(r["score_ci_high"]) + 2e-9,
              f"{name}: score interval")
        # the all-tasks statistic weighs a difference by 1 / its task's count
        count = {}
        for t, _, _ in scored:
            count[t] = count.get(t, 0) + 1
        want = sign_flip([(v - u) / count[t] for t, u, v in scored])
        got_p = float(r["sign_flip_p"])
        check(0 < got_p <= 1 if want is None else math.isclose(got_p, want, rel_tol=1e-9),
              f"{name}: sign-flip p {r['sign_flip_p']} != {want}")

    # power: discordant pairs, the MDE at their share; over the pooled rows
    # Holm's adjustment of the McNemar p and the verdict.
    for r in paired:
        n, disc = int(r["n"]), int(r["baseline_only"]) + int(r["paired_only"])
        name = f'paired.csv {r["task"]} {r["paired"]} {r["budget"]}'
        check(int(r["discordant"]) == disc, f"{name}: discordant {r['discordant']} != {disc}")
        want = mde80(n, disc / n) if n else math.nan
        got_mde = float(r["mde80"])
        check(math.isnan(got_mde) if math.isnan(want) else abs(got_mde - want) <= 5e-9,
              f"{name}: mde80 {r['mde80']} != {want}")
    pooled = [r for r in paired if r["task"] == "all"]
    adjusted = holm([mcnemar(int(r["baseline_only"]), int(r["paired_only"])) for r in pooled])
    for r, h in zip(pooled, adjusted):
        name = f'paired.csv all {r["paired"]} {r["budget"]}'
        check(math.isclose(float(r["holm_p"]), h, rel_tol=1e-4), f"{name}: holm_p {r['holm_p']} != {h}")
        d, mde = float(r["difference"]), float(r["mde80"])
        verdict = ("holds" if h < 0.05 and d > 0 else "fails" if h < 0.05 and d < 0 else
                   "fails" if float(r["ci_high"]) < 0.02 and mde < 0.02 else "undecided")
        check(r["verdict"] == verdict, f"{name}: verdict {r['verdict']} != {verdict}")
    for r in paired:
        if r["task"] != "all":
            check(math.isnan(float(r["holm_p"])) and r["verdict"] == "", "per-task holm_p and verdict")

    # recall.csv: quartiles of recall by rank, per budget and pooled.
    for group in budgets + ["all"]:
        pts = [(float(s["recall"]), int(s["correct"])) for s in samples
               if s["recall"] != "" and s["policy"] not in ("full", "oracle@T")
               and (group == "all" or s["budget"] == group)]
        # the tool's order: by recall, ties in sample-file order (a stable sort)
        order = sorted(range(len(pts)), key=lambda i: pts[i][0])
        got = [r for r in recall if r["budget"] == group]
        n = len(pts)
        want_auc = auc(pts)
        for q in range(4):
            lo, hi = q * n // 4, (q + 1) * n // 4
            if hi == lo:
                continue
            part = [pts[i] for i in order[lo:hi]]
            row = [r for r in got if r["quartile"] == str(q + 1)]
            check(len(row) == 1, f"recall.csv {group} quartile {q + 1} missing")
            if row:
                k = sum(y for _, y in part)
                check(int(row[0]["n"]) == hi - lo and int(row[0]["correct"]) == k,
                      f"recall.csv {group} q{q + 1}: counts")
                check(close(row[0]["recall_low"], part[0][0]) and close(row[0]["recall_high"], part[-1][0]),
                      f"recall.csv {group} q{q + 1}: range")
                a = float(row[0]["auc"])
                check((math.isnan(a) and math.isnan(want_auc)) or close(a, want_auc, 1e-5),
                      f"recall.csv {group}: AUC {a} != {want_auc}")

    # recall_policy.csv: the AUC within each policy, budget and protocol,
    # over every task and length (checked here for one length).
    for r in read(f"{folder}/recall_policy.csv") if len(lengths) == 1 else []:
        sel = [s for s in rows("all", lengths[0], r["policy"], r["budget"], r["protocol"])
               if s["recall"] != ""]
        pts = [(float(s["recall"]), int(s["correct"])) for s in sel]
        name = f'recall_policy.csv {r["policy"]} {r["budget"]} {r["protocol"]}'
        right = [x for x, y in pts if y]
        wrong = [x for x, y in pts if not y]
        check(int(r["n"]) == len(pts) and int(r["correct"]) == len(right), f"{name}: counts")
        want = auc(pts)
        check((r["auc"] == "" and math.isnan(want)) or (r["auc"] != "" and close(r["auc"], want, 1e-6)),
              f"{name}: AUC {r['auc']} != {want}")
        check((r["recall_right"] == "") == (not right) and
              (not right or close(r["recall_right"], sum(right) / len(right), 1e-6)), f"{name}: right")
        check((r["recall_wrong"] == "") == (not wrong) and
              (not wrong or close(r["recall_wrong"], sum(wrong) / len(wrong), 1e-6)), f"{name}: wrong")

    for f in failures:
        print("FAIL:", f)
    print(f"eval_check: {len(accuracy)} accuracy rows, {len(paired)} paired rows, "
          f"{len(recall)} recall rows, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
