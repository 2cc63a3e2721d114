#!/usr/bin/env python3
"""evict/h2o.h's scores against the two published H2O formulas, written in
NumPy from a short capture with every prompt row captured: the eager
attention A of the n rows a protocol compresses over (the context before
the question for the query-agnostic protocol, every prompt row for the
query-aware one) is recomputed from Q, K and lse in double,
  accumulated (the H2O paper, arXiv 2306.14048, and the OBCache paper's
  H2O): scores = A.sum(rows), then the sum over each KV head's group of
  query heads (the paper's GQA form);
  observed (kvpress ObservedAttentionPress): scores = A.sum(rows) /
  arange(n, 0, -1), then the mean over each KV head's group,
and H2O+OBC is the same with A replaced by each OBCache term
(test_column_sums_reference.head_sums). Checked, to 1e-5 relative:
  1. every score, H2O and H2O+OBC, against the formula applied to the
     trace's stored column sums (h2o_scores's own arithmetic);
  2. H2O's scores against the formula applied to A recomputed from Q, K and
     lse (the whole path from the capture on).
The OBCache terms recomputed from Q, K, O and lse differ from the stored
sums by up to a few 1e-5 relative (the capture forms them in float): their
elementwise bound is test_column_sums_reference.py's; here the difference
is printed only. Exits non-zero on any difference."""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_column_sums_reference import head_sums  # noqa: E402  (the recomputed sums)

OBCACHE = os.environ["OBCACHE"]
DUMP = os.environ["OBC_H2O_DUMP"]
TMP = os.environ.get("OBC_TMP", "/tmp")
TERMS = ("attn", "obc_v", "obc_k", "obc_vk")
RELATIVE = 1e-5


def h2o_accumulated(per_head, kv_heads):
    """per_head (heads, n) summed over the rows that saw each position."""
    heads, n = per_head.shape
    return per_head.reshape(kv_heads, heads // kv_heads, n).sum(axis=1)


def kvpress_observed_attention(per_head, kv_heads):
    """per_head (heads, n) summed over the rows that saw each position."""
    heads, n = per_head.shape
    scores = per_head / np.arange(n, 0, -1)
    return scores.reshape(kv_heads, heads // kv_heads, n).mean(axis=1)


# dump order: accumulated, then observed (tests/h2o_dump.c)
FORMS = (("h2o", h2o_accumulated), ("observed-attention", kvpress_observed_attention))


def main():
    trace = os.path.join(TMP, "h2o_reference.h5")
    dump = os.path.join(TMP, "h2o_reference.bin")
    subprocess.run([OBCACHE, "capture", "--length", "200", "--depth", "50", "--haystack", "kjv",
                    "--seed", "5", "--all-rows", "--decode", "2", "-o", trace],
                   check=True, stdout=subprocess.DEVNULL)
    try:
        subprocess.run([DUMP, trace, dump], check=True)
        got = np.fromfile(dump, dtype="<f8")
        with h5py.File(trace, "r") as f:
            return compare(f, got)
    finally:
        for path in (trace, dump):
            if os.path.exists(path):
                os.remove(path)


def compare(f, got):
    at = f.attrs
    s, heads, kv_heads = int(at["n_prompt"]), int(at["n_heads"]), int(at["n_kv_heads"])
    layers, scale, agnostic = int(at["n_layers"]), float(at["attn_scale"]), int(at["agnostic_rows"])
    # reference sums per (variant, term, layer): (heads, n)
    sums = {}
    for layer in range(layers):
        g = f[f"layers/{layer:03d}"]
        K, V = (g[n][()].astype(np.float64) for n in "KV")
        Q, O = (g[n][()].astype(np.float64) for n in "QO")
        lse = g["lse"][()].astype(np.float64)
        for variant, n in ((0, agnostic), (1, s)):
            per_head = {t: np.zeros((heads, n)) for t in TERMS}
            for h in range(heads):
                kv = h // (heads // kv_heads)
                # the protocol's forward sees only its n rows and their keys
                ref, _ = head_sums(Q[h, :n], K[kv, :n], V[kv, :n], O[h, :n], lse[h, :n], scale, n)
                for t in TERMS:
                    per_head[t][h] = ref[t]
            for t in TERMS:
                sums[(variant, t, layer)] = per_head[t]
    stored = {}
    for layer in range(layers):
        g = f[f"layers/{layer:03d}"]
        for t in TERMS:
            both = g[f"col_{t}"][()].astype(np.float64)
            stored[(0, t, layer)] = both[0][:, :agnostic]
            stored[(1, t, layer)] = both[1]
    offset, failures = 0, 0
    for (form, formula), (variant, n) in ((f, v) for f in FORMS for v in ((0, agnostic), (1, s))):
        for t in TERMS:
            worst = {"stored": (0.0, 0, 0, 0), "recomputed": (0.0, 0, 0, 0)}
            for layer in range(layers):
                count = kv_heads * n
                mine = got[offset:offset + count].reshape(kv_heads, n)
                offset += count
                for source, table in (("stored", stored), ("recomputed", sums)):
                    want = formula(table[(variant, t, layer)], kv_heads)
                    rel = np.abs(mine - want) / np.abs(want)
                    at_worst = np.unravel_index(np.argmax(rel), rel.shape)
                    if rel[at_worst] > worst[source][0]:
                        worst[source] = (float(rel[at_worst]), layer, int(at_worst[0]),
                                         int(at_worst[1]))
            name = (form if t == "attn" else form + "+" + t) + (" agnostic" if variant == 0
                                                                 else " aware")
            for source in ("stored", "recomputed"):
                rel, layer, kv, pos = worst[source]
                checked = source == "stored" or t == "attn"
                ok = not checked or rel <= RELATIVE
                failures += not ok
                label = "ok  " if checked and ok else "FAIL" if not ok else "info"
                print(f"{label} {name} from the {source} sums: worst relative difference "
                      f"{rel:.3g} (layer {layer}, KV head {kv}, position {pos})")
    if offset != got.size:
        print(f"FAIL the dump holds {got.size} scores, expected {offset}")
        failures += 1
    if failures:
        print(f"{failures} checks failed")
        return 1
    print("all H2O reference checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
