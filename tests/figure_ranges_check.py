#!/usr/bin/env python3
"""Checks the axis ranges of `obcache plot`'s figures against their data.

usage: figure_ranges_check.py RANGES_DIR KIND FOLDER [OUTDIR]

RANGES_DIR holds FIGURE.png.ranges, written by the figure scripts under
OBC_PLOT_RANGES (plots/style.gp, record_ranges): one line per panel, "figure
panel x_min x_max y_min y_max cb_min cb_max", the ranges gnuplot really drew.
KIND is analysis, replay, eval, sweep or dynamic; FOLDER the data folder the
figures were drawn from (OUTDIR: where obcache plot wrote the derived tables,
eval_paired.csv). For each figure this script reads the data file itself,
computes what each panel shows (with the reference values that belong in
range: 0 of a share or of an error, the uniform share, 0 and 1 of an
accuracy) and fails when an axis cuts data off or leaves more than a third of
its length empty (on a logarithmic axis, in decades). A heat map's axes must
span exactly its categories, one unit per row or column, and its colour
range be 0..1. Prints one line per figure; exits 1 when one fails.
"""
import csv
import json
import math
import os
import sys

EMPTY_MAX = 1.0 / 3.0


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def finite(values):
    return [v for v in values if not math.isnan(v)]


def extent(values):
    values = finite(values)
    return (min(values), max(values)) if values else None


class Panel:
    """What one panel shows: the data's extent on each axis, log or not."""

    def __init__(self, x, y, x_log=False, y_log=False):
        self.x, self.y, self.x_log, self.y_log = x, y, x_log, y_log

    def problems(self, axes):
        out = []
        for name, data, axis, log in (("x", self.x, axes[0:2], self.x_log),
                                      ("y", self.y, axes[2:4], self.y_log)):
            problem = axis_problem(name, data, axis, log)
            if problem:
                out.append(problem)
        return out


class Grid:
    """A heat map: n_x columns and n_y rows of unit cells, each axis exactly
    its categories ([first - 0.5, first - 0.5 + n], first the index of the
    first cell), and the colour range the figure claims (0..1: a share)."""

    def __init__(self, n_x, n_y, x_first=1, y_first=1, cb=(0.0, 1.0)):
        self.x = (x_first - 0.5, x_first - 0.5 + n_x)
        self.y = (y_first - 0.5, y_first - 0.5 + n_y)
        self.cb = cb

    def problems(self, axes):
        out = []
        for name, want, axis in (("x", self.x, axes[0:2]), ("y", self.y, axes[2:4]),
                                 ("colour", self.cb, axes[4:6])):
            if len(axis) < 2:
                out.append("%s: no range recorded" % name)
                continue
            a_lo, a_hi = sorted(axis)
            if abs(a_lo - want[0]) > 1e-6 or abs(a_hi - want[1]) > 1e-6:
                what = ("%g categories" % (want[1] - want[0]) if name != "colour"
                        else "shares")
                out.append("%s: axis [%g, %g] for %s (expected [%g, %g])" % (
                    name, a_lo, a_hi, what, want[0], want[1]))
        return out


def axis_problem(name, data, axis, log):
    """A sentence when the axis cuts the data off or is a third empty."""
    if data is None:
        return None
    lo, hi = data
    a_lo, a_hi = sorted(axis)
    if log:
        if lo <= 0 or a_lo <= 0:
            return "%s: non-positive value on a log axis" % name
        lo, hi, a_lo, a_hi = (math.log10(v) for v in (lo, hi, a_lo, a_hi))
    if log:
        name += " (log10)"
    span = a_hi - a_lo
    if span <= 0:
        return "%s: empty axis [%g, %g]" % (name, a_lo, a_hi)
    tol = 1e-6 * span
    if lo < a_lo - tol or hi > a_hi + tol:
        return "%s: data [%g, %g] cut off by the axis [%g, %g]" % (name, lo, hi, a_lo, a_hi)
    used = (hi - lo) / span
    if hi > lo and used < 1 - EMPTY_MAX:
        return "%s: data [%g, %g] fill %.0f%% of the axis [%g, %g]" % (
            name, lo, hi, 100 * used, a_lo, a_hi)
    return None


def with_refs(data, *refs):
    values = list(data) if data else []
    return extent(values + list(refs))


# --- analysis folders ---------------------------------------------------------

def analysis_panels(folder):
    report = json.load(open(os.path.join(folder, "report.json")))
    par = report["parameters"]
    window, k = par["main_window"], par["main_k"]
    recent = max(par.get("recent", [0]))
    oracle = par.get("oracle", "")
    out = {}

    def by_k(name, value, reference=None):
        table = rows(os.path.join(folder, name))
        def take(r):
            return (num(r["window"]) == window and
                    (reference is None or "reference" not in r or r["reference"] == reference))
        panels, y_all = [], []
        for rec in ([0, recent] if recent > 0 else [0]):
            sel = [r for r in table if take(r) and num(r["recent"]) == rec]
            y_all += [num(r[value]) for r in sel]
            panels.append(extent([num(r["k"]) for r in sel]))
        y = with_refs(extent(y_all), 0.0)  # one y axis for both panels, from 0
        return [Panel(x, y, x_log=True) for x in panels]

    out["recall_k"] = by_k("recall.csv", "recall_mean",
                           oracle if par.get("references") else None)
    out["needle_k"] = by_k("needle.csv", "retention")

    recall = rows(os.path.join(folder, "recall.csv"))
    has_ref = bool(recall) and "reference" in recall[0] and bool(par.get("references"))
    sel = [[r for r in recall if num(r["k"]) == k and num(r["recent"]) == rec and
            (not has_ref or r["reference"] == oracle)]
           for rec in ([0, recent] if recent > 0 else [0])]
    y = with_refs(extent([num(r["recall_mean"]) for p in sel for r in p]), 0.0)
    out["recall_window"] = [Panel(extent([num(r["window"]) for r in p]), y, x_log=True) for p in sel]
    refs = par.get("references") if has_ref else [None]
    sel = [[r for r in recall if num(r["window"]) == window and num(r["recent"]) == 0 and
            (ref is None or r["reference"] == ref)] for ref in refs]
    y = with_refs(extent([num(r["recall_mean"]) for p in sel for r in p]), 0.0)
    out["recall_oracles"] = [Panel(extent([num(r["k"]) for r in p]), y, x_log=True) for p in sel]

    bias = [r for r in rows(os.path.join(folder, "bias.csv"))
            if num(r["window"]) == window and num(r["k"]) == k and num(r["recent"]) == 0]
    buckets = int(max(num(r["bucket"]) for r in bias)) + 1
    last_lo = 1.0 - 1.0 / buckets
    mid = [(0.5 * (num(r["bucket_lo"]) + num(r["bucket_hi"])), num(r["selected_share"]), r["score"])
           for r in bias]
    early = [m for m in mid if m[0] < last_lo]
    last = [m for m in mid if m[0] > last_lo]
    n_scores = len({m[2] for m in mid})
    out["bias_share"] = [
        Panel(extent([m[0] for m in early]), with_refs(extent([m[1] for m in early]), 0.0, 1.0 / buckets)),
        # bars from 0 to each share, one row per score (half-height 0.35)
        Panel(with_refs(extent([m[1] for m in last]), 0.0), (0.65, n_scores + 0.35)),
    ]

    # bias_windows: one panel per score of attn attn_vl1 obc_vk remove present,
    # every window, the oracle of the first window; before the last bucket.
    all_bias = [r for r in rows(os.path.join(folder, "bias.csv"))
                if num(r["k"]) == k and num(r["recent"]) == 0]
    present = [s for s in ("attn", "attn_vl1", "obc_vk", "remove") if any(r["score"] == s for r in all_bias)]
    first_w = min(num(r["window"]) for r in all_bias)
    early_rows = [r for r in all_bias if 0.5 * (num(r["bucket_lo"]) + num(r["bucket_hi"])) < last_lo and
                  (r["score"] in present or (r["score"] == oracle and num(r["window"]) == first_w))]
    y = with_refs(extent([num(r["selected_share"]) for r in early_rows]), 0.0)
    x = extent([0.5 * (num(r["bucket_lo"]) + num(r["bucket_hi"])) for r in early_rows])
    out["bias_windows"] = [Panel(x, y) for _ in present]

    # bias_score: the mean normalised score per bucket midpoint of every score
    # (positive values: a log y axis) at the main window and budget, the
    # average token (1) in range; x the relative position, [0, 1].
    score_rows = [r for r in rows(os.path.join(folder, "bias.csv"))
                  if num(r["window"]) == window and num(r["k"]) == k and num(r["recent"]) == 0
                  and num(r["mean_norm_score"]) > 0]
    out["bias_score"] = [Panel(
        with_refs(extent([0.5 * (num(r["bucket_lo"]) + num(r["bucket_hi"])) for r in score_rows]),
                  0.0, 1.0),
        with_refs(extent([num(r["mean_norm_score"]) for r in score_rows]), 1.0), y_log=True)]

    # recall_layers: one column per score, one row per layer (from 0), at the
    # main window and budget without the recent window; recall in 0..1.
    layer_rows = [r for r in rows(os.path.join(folder, "recall_layers.csv"))
                  if num(r["window"]) == window and num(r["k"]) == k and num(r["recent"]) == 0]
    n_layers = int(max(num(r["layer"]) for r in layer_rows)) + 1
    out["recall_layers"] = [Grid(len({r["score"] for r in layer_rows}), n_layers, y_first=0)]

    taylor = rows(os.path.join(folder, "taylor.csv"))
    panels = []
    for xcol, ycol in (("obc_v", "exact_v"), ("obc_k", "exact_k"), ("obc_vk", "exact_vk"),
                       ("remove", "oracle")):
        pts = [(num(r[xcol]), num(r[ycol])) for r in taylor]
        pts = [p for p in pts if p[0] > 0 and p[1] > 0]
        if not pts:
            panels.append(Panel(None, None, True, True))
            continue
        both = [v for p in pts for v in p]
        lo, hi = min(both), max(both)
        # plots/taylor.gp: at most `decades` (16) decades below the largest
        # value; the panel's title counts the points below.
        floor_v = 10.0 ** (math.ceil(math.log10(hi)) - 16)
        data = (max(lo, floor_v), hi)
        panels.append(Panel(data, data, True, True))  # one range on both axes: y = x
    out["taylor"] = panels
    return out


# --- replay sweep folders -------------------------------------------------------

def replay_panels(folder):
    table = rows(os.path.join(folder, "replay_sweep.csv"))
    budgets = extent([100 * num(r["fraction"]) for r in table])
    n_budgets = len({r["budget"] for r in table})
    n_scores = len({r["score"] for r in table})
    floor_v = 1e-6  # zero drawn at the floor of the log axis

    def col(name):
        return [num(r[name]) for r in table]

    out = {
        "replay_needle": [
            Panel((0.5, n_budgets + 0.5), (0.5, n_scores + 0.5)),  # the policy x budget table
            Panel(budgets, with_refs(extent(col("needle_prefix_share")), 0.0), x_log=True),
            Panel(budgets, with_refs(extent(col("needle_kept")), 0.0), x_log=True),
        ],
        "replay_kl": [
            Panel(budgets, extent([max(v, floor_v) for v in col("kl_forced")]), True, True),
            Panel(budgets, with_refs(extent(col("rel_error")), 0.0), x_log=True),
        ],
    }
    steps = rows(os.path.join(folder, "kl_steps.csv"))
    y = extent([max(num(r["kl_forced"]), floor_v) for r in steps])  # one y axis for all panels
    order = []
    for r in steps:
        if r["budget"] not in order:
            order.append(r["budget"])
    out["replay_kl_steps"] = [
        Panel(extent([num(r["step"]) for r in steps if r["budget"] == b]), y, y_log=True)
        for b in order]
    return out


# --- eval folders -------------------------------------------------------------------

def eval_panels(folder, outdir):
    acc = rows(os.path.join(folder, "accuracy.csv"))
    n_budgets = len({r["budget"] for r in acc if r["budget"]})
    panels = {}
    for r in acc:
        panels.setdefault((r["task"], r["length"]), []).append(r)
    accuracy = []
    for sel in panels.values():
        # the figure draws RULER's score interval when the file has it
        low, high = ("score_ci_low", "score_ci_high") if "score_ci_low" in sel[0] else ("ci_low", "ci_high")
        lows = [num(r[low]) for r in sel] + [num(r[high]) for r in sel]
        # an accuracy axis keeps 0 and 1 in range
        accuracy.append(Panel((0.5, n_budgets + 0.5), with_refs(extent(lows), 0.0, 1.0)))
    out = {"eval_accuracy": accuracy}
    paired = rows(os.path.join(outdir, "eval_paired.csv"))
    x = with_refs(extent([num(r["ci_low"]) for r in paired] + [num(r["ci_high"]) for r in paired]), 0.0)
    out["eval_paired"] = [Panel(x, (0.5, len(paired) + 0.5))]  # one row each
    rec = rows(os.path.join(folder, "recall.csv"))
    y = with_refs(extent([num(r["ci_low"]) for r in rec] + [num(r["ci_high"]) for r in rec]), 0.0, 1.0)
    out["eval_recall"] = [Panel((0.5, 4.5), y)]  # the four quartiles
    # eval_heatmap: one map per (policy, protocol), a column per budget, a row
    # per (task, length); accuracy in 0..1.
    policy_rows = [r for r in acc if r["policy"] != "full"]
    n_rows = len({(r["task"], r["length"]) for r in policy_rows})
    n_maps = len({(r["policy"], r["protocol"]) for r in policy_rows})
    out["eval_heatmap"] = [Grid(n_budgets, n_rows) for _ in range(n_maps)]
    return out


# --- sweep folders ------------------------------------------------------------------

def sweep_panels(folder):
    table = rows(os.path.join(folder, "summary.csv"))
    sel = [r for r in table if num(r["k"]) == num(table[0]["k"])]  # the first row's budget
    n_lengths = len({num(r["length"]) for r in sel})
    n_depths = len({num(r["depth"]) for r in sel})
    n_scores = len({r["score"] for r in sel})
    # a column per context length, a row per needle depth; shares in 0..1
    return {"sweep_needle": [Grid(n_lengths, n_depths)],
            "sweep_recall": [Grid(n_lengths, n_depths) for _ in range(n_scores)]}


# --- dynamic folders ----------------------------------------------------------------

def dynamic_panels(folder):
    table = rows(os.path.join(folder, "dynamic.csv"))
    budgets = []
    for r in table:
        if num(r["budget"]) != 0 and num(r["budget"]) not in budgets:
            budgets.append(num(r["budget"]))
    panels = []
    for b in budgets:  # the full cache in every panel
        sel = [r for r in table if r["score"] == "full" or num(r["budget"]) == b]
        panels.append(Panel(extent([num(r["position"]) for r in sel]),
                            extent([num(r["ppl_window"]) for r in sel])))
    return {"dynamic_ppl": panels}


def read_ranges(path):
    panels = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            w = line.split()
            panels.append(tuple(float(v) for v in w[2:8]))
    return panels


def main():
    kinds = {"analysis": lambda folder, outdir: analysis_panels(folder),
             "replay": lambda folder, outdir: replay_panels(folder),
             "eval": eval_panels,
             "sweep": lambda folder, outdir: sweep_panels(folder),
             "dynamic": lambda folder, outdir: dynamic_panels(folder)}
    if len(sys.argv) not in (4, 5) or sys.argv[2] not in kinds:
        sys.exit(__doc__)
    ranges_dir, kind, folder = sys.argv[1:4]
    outdir = sys.argv[4] if len(sys.argv) == 5 else os.path.join(folder, "plots")
    figures = kinds[kind](folder, outdir)
    failed = 0
    for figure, expected in figures.items():
        path = os.path.join(ranges_dir, figure + ".png.ranges")
        if not os.path.exists(path):
            print("FAIL  %s: no ranges recorded (%s)" % (figure, path))
            failed += 1
            continue
        drawn = read_ranges(path)
        problems = []
        if len(drawn) != len(expected):
            problems.append("%d panels recorded, %d expected" % (len(drawn), len(expected)))
        for i, (panel, axes) in enumerate(zip(expected, drawn), 1):
            problems += ["panel %d %s" % (i, p) for p in panel.problems(axes)]
        if problems:
            print("FAIL  %s: %s" % (figure, "; ".join(problems)))
            failed += 1
        else:
            print("ok    %s: %d panels, every axis fits its data" % (figure, len(drawn)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
