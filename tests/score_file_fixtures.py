#!/usr/bin/env python3
"""Fixtures and checks of tests/test_score_file.sh (scores from a file).

usage: score_file_fixtures.py make SOURCE.h5 DATASET DIR
         writes into DIR, from SOURCE's DATASET (a --scores-out file):
         copy.h5 (the dataset alone as "s", float64, SOURCE's trace_hash,
         as a user's tool would write it), f32.h5 (the same as float32) and
         one file per way a score file can be wrong (see the names below).
       score_file_fixtures.py same KEEP_A.h5 KEEP_B.h5
         exit 0 when both keep files keep the same positions (keep mask).
       score_file_fixtures.py recall RECALL.csv NAME BUILTIN WINDOW
         exit 0 when analyze's recall.csv gives file score NAME (window 0)
         the same recall as BUILTIN at WINDOW for every recent, k and
         reference (and has rows for both)."""
import sys

import h5py
import numpy as np


def write(path, datasets, trace_hash):
    with h5py.File(path, "w") as f:
        for name, values in datasets.items():
            f[name] = values
        if trace_hash is not None:
            f.attrs["trace_hash"] = trace_hash


def make(source, dataset, folder):
    with h5py.File(source, "r") as f:
        values = f[dataset][()]
        trace_hash = f.attrs["trace_hash"]
    if isinstance(trace_hash, bytes):
        trace_hash = trace_hash.decode()
    out = lambda name: f"{folder}/{name}.h5"
    write(out("copy"), {"s": values.astype(np.float64)}, trace_hash)
    write(out("f32"), {"s": values.astype(np.float32)}, trace_hash)
    write(out("two"), {"a": values, "b": values}, trace_hash)
    write(out("rank"), {"s": values[0]}, trace_hash)
    write(out("heads"), {"s": values[:, :1]}, trace_hash)
    write(out("short"), {"s": values[:, :, :3]}, trace_hash)
    write(out("other"), {"s": values}, "0123456789abcdef")
    write(out("nohash"), {"s": values}, None)
    write(out("ints"), {"s": values.astype(np.int32)}, trace_hash)
    bad = values.copy()
    bad[0, 1, 2] = np.nan
    write(out("nan"), {"s": bad}, trace_hash)
    bad = values.copy()
    bad[-1, 0, 1] = -np.inf
    write(out("inf"), {"s": bad}, trace_hash)
    with open(out("text"), "w") as f:
        f.write("not an HDF5 file\n")


def same(a, b):
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        ka, kb = fa["keep"][()], fb["keep"][()]
    if ka.shape != kb.shape or not np.array_equal(ka, kb):
        print(f"{a} and {b} keep different sets ({int((ka != kb).sum())} positions differ)")
        return 1
    return 0


def recall(path, name, builtin, window):
    import csv

    rows = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            key = (row["recent"], row["k"], row["reference"])
            if row["score"] == name and row["window"] == "0":
                rows.setdefault(key, {})["file"] = row["recall_mean"]
            elif row["score"] == builtin and row["window"] == window:
                rows.setdefault(key, {})["builtin"] = row["recall_mean"]
    bad = [k for k, v in rows.items() if v.get("file") is None or v.get("file") != v.get("builtin")]
    if not rows or bad:
        print(f"{path}: {name} and {builtin} differ at {bad[:5]} ({len(rows)} rows)")
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 6 and sys.argv[1] == "recall":
        sys.exit(recall(*sys.argv[2:]))
    elif len(sys.argv) == 4 and sys.argv[1] == "same":
        sys.exit(same(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
