#!/usr/bin/env python3
"""Checks that every kept set of an eval sample (kept with --keep-traces) is
the one `obcache evict` keeps from the same trace, one score a process on one
thread: the eval scores its policies in parallel, one a thread.

usage: eval_kept_check.py OBCACHE FOLDER [KEPT]   (cell 0 of FOLDER)

KEPT: a folder of evict's keep files of the same trace, written one score a
process on one thread as KEPT/evict.NAME.h5 at the eval's budget and
protocol; a policy whose file is there is read from it instead of running
evict again.

The eval's sample.json records, per replayed set, the count kept per head
and the recall against oracle@T's set (the mean over heads of |K & O| / |O|).
Both are recomputed from evict's keep files with NumPy: the recall the same
way, so the two agree to rounding (1e-12 here), while a set that differs
by one token moves it by at least 1 / (|O| x heads), above 1e-5 at these
sizes."""
import json
import os
import subprocess
import sys

import h5py


def main():
    obcache, folder = sys.argv[1:3]
    kept_dir = sys.argv[3] if len(sys.argv) > 3 else None
    cell = folder + "/cells/0"
    sample = json.load(open(cell + "/sample.json"))
    trace = cell + "/trace.h5"
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def keep(score, budget, protocol):
        given = kept_dir and "%s/evict.%s.h5" % (kept_dir, score)
        if given and os.path.exists(given):
            with h5py.File(given, "r") as f:
                recorded = f.attrs["protocol"]
                if isinstance(recorded, bytes):
                    recorded = recorded.decode()
                assert recorded == protocol, (given, recorded, protocol)
                return f["keep"][()].astype(bool), f.attrs["budget"]
        out = folder + "/kept-check.h5"
        subprocess.run([obcache, "evict", trace, "--score", score, "--budget", budget,
                        "--protocol", protocol, "-o", out], check=True, capture_output=True,
                       env=env)
        with h5py.File(out, "r") as f:
            mask, kept = f["keep"][()].astype(bool), f.attrs["budget"]
        os.unlink(out)
        return mask, kept

    steps = "T" if sample["oracle_steps"] == sample["decode"] else "1-%d" % sample["oracle_steps"]
    oracles = {}
    checked = 0
    for row in sample["rows"]:
        if row["policy"] == "oracle@T":
            continue
        n = row["candidates"]
        where = (row["budget"], row["protocol"])
        if where not in oracles:
            oracles[where] = keep("oracle@" + steps, *where)[0]
        oracle = oracles[where]
        mask, kept = keep(row["policy"], row["budget"], row["protocol"])
        o, k = oracle[..., :n], mask[..., :n]
        recall = ((k & o).sum(-1) / o.sum(-1)).mean()
        assert kept == row["kept"], (row, kept)
        assert abs(recall - row["recall"]) <= 1e-12, (row, recall)
        checked += 1
    assert checked >= 3, checked
    print("     %d kept sets: the eval's equal evict's, one score a process" % checked)


if __name__ == "__main__":
    main()
