#!/usr/bin/env python3
"""Forged copies of a finished eval folder for tests/test_eval_forged.sh.

usage: eval_forge.py KIND GOOD COPY

Copies GOOD (an eval of niah_single_1, 2 samples of 512 tokens, knorm at
25%, run and not merged) to COPY and edits one file as KIND says. Each
edited cell's complete.json is rewritten with the new sizes and FNV-1a 64
checksums, as sweep/cell.c writes them, so that the manifest passes and
only the content can betray the forgery.
"""
import json
import os
import shutil
import sys


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def remanifest(cell):
    path = os.path.join(cell, "complete.json")
    manifest = json.load(open(path))
    for f in manifest["files"]:
        data = open(os.path.join(cell, f["path"]), "rb").read()
        f["bytes"] = len(data)
        f["fnv1a64"] = fnv1a64(data)
    json.dump(manifest, open(path, "w"), indent=1)


def edit_json(path, change):
    doc = json.load(open(path))
    change(doc)
    json.dump(doc, open(path, "w"), indent=1)


def edit_sample(copy, cell, change):
    edit_json(os.path.join(copy, "cells", str(cell), "sample.json"), change)
    remanifest(os.path.join(copy, "cells", str(cell)))


def edit_plan(copy, change):
    edit_json(os.path.join(copy, "plan.json"), change)


def set_option(plan, name, value):
    options = plan["options"]
    if name in options:
        options[options.index(name) + 1] = value
    else:
        options += [name, value]


def row(sample, policy):
    return next(r for r in sample["rows"] if r["policy"] == policy)


def main():
    kind, good, copy = sys.argv[1:4]
    shutil.copytree(good, copy)

    def flag(s):  # a wrong answer flagged correct, its score left at 0
        assert s["full"]["score"] == 0, s["full"]
        s["full"]["correct"] = True

    def score(s):  # RULER's score 1 beside correct false, the answer wrong
        r = row(s, "knorm")
        assert r["score"] == 0, r
        r["score"] = 1

    def needle(s):  # the answer holds every reference, yet flagged wrong
        s["full"]["answer"] = " " + " ".join(s["answers"])
        s["full"]["score"] = 0
        s["full"]["correct"] = False

    def kept(s, delta):
        r = row(s, "knorm")
        r["kept"] = r["kept"] + delta if delta else r["candidates"] + 5

    if kind == "untouched":
        for cell in ("0", "1"):
            remanifest(os.path.join(copy, "cells", cell))
    elif kind == "flag-contradicts-answer":
        edit_sample(copy, 0, flag)
    elif kind == "score-contradicts-answer":
        edit_sample(copy, 0, score)
    elif kind == "answer-holds-the-needle":
        edit_sample(copy, 0, needle)
    elif kind == "references-changed":
        # prompt.json and sample.json agree on other references, which the
        # recorded answers do not match as recorded.
        cell = os.path.join(copy, "cells", "1")
        full = json.load(open(os.path.join(cell, "sample.json")))["full"]["answer"]
        fake = [full.strip() or "x"]
        edit_json(os.path.join(cell, "prompt.json"), lambda p: p.__setitem__("answers", fake))
        edit_sample(copy, 1, lambda s: s.__setitem__("answers", fake))
    elif kind == "answers-not-the-prompts":
        edit_sample(copy, 0, lambda s: s.__setitem__("answers", ["0000000"]))
    elif kind == "kept-not-the-budget":
        edit_sample(copy, 0, lambda s: kept(s, 1))
    elif kind == "kept-above-candidates":
        edit_sample(copy, 0, lambda s: kept(s, 0))
    elif kind == "candidates-above-tokens":
        edit_sample(copy, 0, lambda s: row(s, "knorm").__setitem__("candidates", s["tokens"] + 1))
    elif kind == "recall-of-the-oracle":
        edit_sample(copy, 0, lambda s: row(s, "oracle@T").__setitem__("recall", 0.5))
    elif kind == "seed-not-the-plans":
        edit_sample(copy, 1, lambda s: s.__setitem__("seed", "5"))
    elif kind == "plan-seed-negative":
        edit_plan(copy, lambda p: p.__setitem__("seed", "-1"))
    elif kind == "plan-seed-2^64":
        edit_plan(copy, lambda p: p.__setitem__("seed", str(2**64)))
    elif kind == "plan-seed-foreign":
        edit_plan(copy, lambda p: p.__setitem__("seed", "7"))
    elif kind == "plan-samples-huge":
        edit_plan(copy, lambda p: set_option(p, "--samples", "100000"))
    elif kind == "plan-budgets-twice":
        edit_plan(copy, lambda p: set_option(p, "--budgets", "25%,0.25"))
    elif kind == "plan-scores-twice":
        edit_plan(copy, lambda p: set_option(p, "--scores", "knorm,knorm"))
    elif kind == "plan-sample-twice":
        def twice(p):
            p["cells"][1] = dict(p["cells"][0], id=1)
        edit_plan(copy, twice)
    elif kind == "plan-key-twice":
        path = os.path.join(copy, "plan.json")
        text = open(path).read()
        assert '"seed":' in text
        open(path, "w").write(text.replace('"seed":', '"seed": "1", "seed":', 1))
    elif kind == "plan-score-escapes":
        edit_plan(copy, lambda p: set_option(p, "--scores", "knorm\x1b[31m\nred"))
    else:
        sys.exit("eval_forge.py: unknown kind " + kind)


if __name__ == "__main__":
    main()
