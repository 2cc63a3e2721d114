#!/usr/bin/env python3
"""Markdown tables of a merged `obcache eval` study folder (accuracy.csv,
paired.csv, recall.csv, recall_policy.csv, eval.json), for docs/RESULTS.md
and the README's headline.

usage: study_tables.py DIR headline|results        print one block
       study_tables.py DIR --update FILE BLOCK ...  replace each BLOCK
                                                    between its markers
The markers are the lines `<!-- BEGIN study:BLOCK -->` and
`<!-- END study:BLOCK -->`; what lies between them is rewritten, nothing
else. Scores are RULER's (mean string_match_all x100, over all tasks the mean
of the task means) with their bootstrap 95% intervals; paired rows are the
pooled ones (task "all") of paired.csv, with the verdict the merge wrote."""
import csv
import json
import os
import re
import subprocess
import sys

NAMES = {"h2o": "H2O (the paper's)", "tova": "TOVA (kvpress)", "preset:snapkv": "SnapKV (kvpress)",
         "snapkv": "SnapKV (kvpress)", "adakv-snapkv": "AdaKV (kvpress, over SnapKV)",
         "oracle@T": "oracle@T (sees the answer)", "full": "full cache"}


def name(policy):
    if "+obc_" in policy:
        base, score = policy.split("+", 1)
        return f"{NAMES.get(base, base).split(' (')[0]} + {score}"
    return NAMES.get(policy, policy)


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def pct(x):
    return f"{100 * float(x):.1f}"


def signed(x):
    return f"{100 * float(x):+.1f}"


def load(folder):
    ev = json.load(open(os.path.join(folder, "eval.json")))
    acc = [r for r in read(os.path.join(folder, "accuracy.csv")) if r["task"] == "all"]
    paired = [r for r in read(os.path.join(folder, "paired.csv")) if r["task"] == "all"]
    return ev, acc, paired, read(os.path.join(folder, "accuracy.csv"))


def commit_of(folder):
    try:
        out = subprocess.run(["git", "log", "-1", "--format=%h", "--", os.path.join(folder, "cells")],
                             capture_output=True, text=True, check=True).stdout.strip()
        return out or "uncommitted"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def score_table(ev, acc):
    budgets = ev["budgets"]
    cell = {(r["policy"], r["budget"]): r for r in acc}
    lines = ["| policy | " + " | ".join(f"{b} of the cache" if i == 0 else b
                                         for i, b in enumerate(budgets)) + " |",
             "|---|" + "---|" * len(budgets)]
    full = cell[("full", "")]
    lines.append(f"| full cache | {pct(full['score'])} [{pct(full['score_ci_low'])}, "
                 f"{pct(full['score_ci_high'])}] |" + " |" * (len(budgets) - 1))
    for policy in ev["policies"] + ["oracle@T"]:
        row = []
        for b in budgets:
            r = cell[(policy, b)]
            row.append(f"{pct(r['score'])} [{pct(r['score_ci_low'])}, {pct(r['score_ci_high'])}]")
        lines.append(f"| {name(policy)} | " + " | ".join(row) + " |")
    return lines


def paired_table(ev, paired, long):
    lines = []
    if long:
        lines += ["| pairing | budget | score difference [95%] | McNemar p | Holm p | discordant "
                  "of n | MDE (80%) | the paper's claim |", "|---|---|---|---|---|---|---|---|"]
    else:
        lines += ["| pairing | " + " | ".join(ev["budgets"]) + " |",
                  "|---|" + "---|" * len(ev["budgets"])]
    by_pair = {}
    for r in paired:
        by_pair.setdefault(r["paired"], []).append(r)
    for pair, rows in by_pair.items():
        if long:
            for r in rows:
                mde = "-" if r["mde80"] == "nan" else pct(r["mde80"])
                lines.append(f"| {name(pair)} vs {name(r['baseline'])} | {r['budget']} | "
                             f"{signed(r['score_difference'])} [{signed(r['score_ci_low'])}, "
                             f"{signed(r['score_ci_high'])}] | {float(r['mcnemar_p']):.2g} | "
                             f"{float(r['holm_p']):.2g} | {r['discordant']} of {r['n']} | {mde} | "
                             f"{r['verdict']} |")
        else:
            cells = []
            for r in rows:
                mde = "-" if r["mde80"] == "nan" else pct(r["mde80"])
                cells.append(f"{signed(r['score_difference'])} [{signed(r['score_ci_low'])}, "
                             f"{signed(r['score_ci_high'])}], MDE {mde}: **{r['verdict']}**")
            lines.append(f"| {name(pair)} | " + " | ".join(cells) + " |")
    return lines


def headline(folder, where="."):
    ev, acc, paired, _ = load(folder)
    done, planned = ev["samples_done"], ev["samples_planned"]
    n = min(int(r["n"]) for r in paired) if paired else 0
    tasks = ", ".join(f"`{t}`" for t in ev["tasks"])
    out = [f"RULER's score x100 [bootstrap 95%] over {done} of the {planned} planned samples "
           f"({tasks} at {ev['lengths'][0]} tokens, query-agnostic, answers of at most 16 tokens; "
           f"[the study]({os.path.relpath(os.path.join(folder, 'PLAN.md'), where)}), "
           f"fixed before it ran, cells as of commit {commit_of(folder)}):", ""]
    out += score_table(ev, acc)
    out += ["", f"Each pairing against its baseline on the same {n} samples: the score difference "
            "x100 [paired bootstrap 95%], the accuracy difference the exact McNemar test detects "
            "with 80% power (MDE, x100), and the verdict on the paper's claim of a gain (Holm "
            "over the 12 rows; `undecided` = neither a significant gain nor a gain of 2 points "
            "ruled out):", ""]
    out += paired_table(ev, paired, long=False)
    return out


def results(folder, where="."):
    ev, acc, paired, every = load(folder)
    base = os.path.basename(os.path.normpath(folder))
    out = headline(folder, where)
    out += ["", "Every pooled pairing (`paired.csv`, task `all`):", ""]
    out += paired_table(ev, paired, long=True)
    out += ["", "The full cache per task (`accuracy.csv`): " + ", ".join(
        f"`{r['task']}` {pct(r['score'])} (n = {r['n']})" for r in every
        if r["policy"] == "full" and r["task"] != "all") + "."]
    rp = read(os.path.join(folder, "recall_policy.csv"))
    rec = [r for r in read(os.path.join(folder, "recall.csv")) if r["quartile"] == "1"]
    out += ["", "Recall against oracle@T and correctness (`recall.csv`, `recall_policy.csv`): "
            "the AUC of recall as a predictor of a right answer, over every policy but the oracle, "
            "per budget: " + ", ".join(f"{r['budget']} {float(r['auc']):.2f}" for r in rec) +
            "; within one policy and budget (mean recall of the right answers / of the wrong "
            "ones, where both occur):", "",
            "| policy | " + " | ".join(ev["budgets"]) + " |", "|---|" + "---|" * len(ev["budgets"])]
    cell = {(r["policy"], r["budget"]): r for r in rp}
    for policy in ev["policies"]:
        row = []
        for b in ev["budgets"]:
            r = cell.get((policy, b))
            if not r or r["auc"] == "nan":
                row.append("-")
            else:
                row.append(f"AUC {float(r['auc']):.2f} ({float(r['recall_right']):.2f} / "
                           f"{float(r['recall_wrong']):.2f})")
        out.append(f"| {name(policy)} | " + " | ".join(row) + " |")
    out += ["", "Reproduce: `docs/results/%s/run.sh --threads N` (resumable; or the plan through "
            "`scripts/slurm/submit.sh docs/results/%s N`), then `obcache eval docs/results/%s "
            "--merge`; this text: `scripts/study_tables.py docs/results/%s --update "
            "docs/RESULTS.md results`." % (base, base, base, base)]
    return out


BLOCKS = {"headline": headline, "results": results}


def update(folder, path, blocks):
    text = open(path).read()
    for block in blocks:
        pattern = re.compile(r"(<!-- BEGIN study:%s -->\n).*?(<!-- END study:%s -->)" % (block, block),
                             re.S)
        if not pattern.search(text):
            sys.exit(f"study_tables: {path}: no markers of block '{block}'")
        body = "\n".join(BLOCKS[block](folder, os.path.dirname(os.path.abspath(path)))) + "\n"
        text = pattern.sub(lambda m: m.group(1) + body + m.group(2), text)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main(argv):
    if len(argv) == 3 and argv[2] in BLOCKS:
        print("\n".join(BLOCKS[argv[2]](argv[1])))
    elif len(argv) >= 5 and argv[2] == "--update" and all(b in BLOCKS for b in argv[4:]):
        update(argv[1], argv[3], argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
