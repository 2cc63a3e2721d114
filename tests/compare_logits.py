#!/usr/bin/env python3
"""Compares the logits of the native and --weights f32 paths (raw float32
files of `obcache logits --all`) with the tolerance of docs/SCIENCE.md
("Stored-type weights"): per position, max |native - f32| <= tol * max |f32|
with tol = 2 lambda sqrt(K) u (7 L + 1), lambda = 7, u = 2^-24, K the longest
inner dimension (max(dim, ffn)), L the layers; and the same argmax wherever
the f32 top-2 margin exceeds 2 tol * max |f32| (each of the two logits may
move by tol). Prints one ok/FAIL line; exit status 1 on failure.

usage: compare_logits.py NATIVE.f32 F32.f32 VOCAB K LAYERS LABEL
"""
import math
import sys

import numpy as np


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    vocab, k, layers = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    native = np.fromfile(sys.argv[1], dtype="<f4").reshape(-1, vocab).astype(np.float64)
    f32 = np.fromfile(sys.argv[2], dtype="<f4").reshape(-1, vocab).astype(np.float64)
    tol = 2 * 7 * math.sqrt(k) * 2.0**-24 * (7 * layers + 1)
    peak = np.abs(f32).max(axis=1)
    diff = np.abs(native - f32).max(axis=1)
    top2 = np.sort(f32, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * tol * peak
    same = native.argmax(axis=1) == f32.argmax(axis=1)
    ok = bool(native.shape == f32.shape and (diff <= tol * peak).all() and same[clear].all())
    print(f"{'ok  ' if ok else 'FAIL'} {sys.argv[6]}: native vs f32 max |diff| "
          f"{(diff / peak).max():.3g} of the largest logit (tolerance {tol:.3g}); argmax equal at "
          f"{int(same[clear].sum())} of {int(clear.sum())} positions with a clear margin")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
