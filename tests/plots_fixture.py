#!/usr/bin/env python3
"""Writes a synthetic analysis folder (or sweep folder) in the exact format
`obcache analyze` produces (report.json plus the CSVs of the analysis-output
contract), so the plot command can be tested before and independently of a
real trace. The numbers are made up but shaped like real results (recall
grows with k, attention scores pile up on early positions, Taylor scores track
their exact errors), from a fixed seed: the same folder every run.

usage: plots_fixture.py analysis DIR [--layers N]
       plots_fixture.py sweep DIR
"""
import json
import math
import os
import random
import sys

SCORES = ["attn", "attn2", "attn_vl1", "attn_maxpool", "obc_v", "obc_k", "obc_vk",
          "exact_v", "exact_k", "exact_vk", "remove"]
# How close each score's selection comes to the oracle's (fixture only).
QUALITY = {"attn": 0.55, "attn2": 0.52, "attn_vl1": 0.62, "attn_maxpool": 0.58,
           "obc_v": 0.70, "obc_k": 0.66, "obc_vk": 0.76, "exact_v": 0.70,
           "exact_k": 0.68, "exact_vk": 0.78, "remove": 0.85}
WINDOWS = [1, 2, 4, 8, 16, 32, 64]
MAIN_WINDOW = 16
TOPK = [5, 10, 20, 40, 80]
RECENT = [0, 8]
ORACLE = "oracle1"
BUCKETS = 20
N_PROMPT = 256
N_KV_HEADS = 2


def num(x):
    """Formats a number as the analyser does (%.9g)."""
    return "%.9g" % x


def write_csv(path, header, rows):
    with open(path, "w") as f:
        f.write(header + "\n")
        for row in rows:
            f.write(",".join(r if isinstance(r, str) else num(r) for r in row) + "\n")


def recall_value(rng, score, window, recent, k, layer=None):
    """A plausible recall: grows with k, peaks at a middle window, gains a
    little from a recent window; deterministic noise per call order."""
    q = QUALITY[score]
    window_effect = 1.0 - 0.08 * abs(math.log2(window) - math.log2(MAIN_WINDOW)) / 3.0
    k_effect = 0.55 + 0.45 * (k / (k + 15.0)) / (80 / 95.0)
    recent_effect = 1.06 if recent else 1.0
    layer_effect = 1.0 if layer is None else 0.85 + 0.25 * math.sin(layer * 1.3) ** 2
    value = q * window_effect * k_effect * recent_effect * layer_effect
    value += rng.uniform(-0.02, 0.02)
    return min(1.0, max(0.0, value))


def bias_rows(rng):
    """selected_share and mean_norm_score per bucket: attention-only scores
    favour early positions (the structural bias), the oracle the needle and
    the end of the prompt."""
    rows = []
    for score in SCORES + [ORACLE]:
        for window in WINDOWS:
            for k in TOPK:
                early = {"attn": 3.0, "attn2": 3.2, "attn_vl1": 2.4, "attn_maxpool": 2.8,
                         "obc_v": 1.8, "obc_k": 1.5, "obc_vk": 1.4, "exact_v": 1.8,
                         "exact_k": 1.5, "exact_vk": 1.3, "remove": 1.1,
                         ORACLE: 0.6}[score] * (1 + math.log2(window) / 6)
                weights = []
                for b in range(BUCKETS):
                    mid = (b + 0.5) / BUCKETS
                    w = math.exp(-early * mid * 3) * early + 0.3 + 1.5 * mid ** 4
                    if b == 11:  # the needle's bucket
                        w += 0.8 if score in (ORACLE, "remove", "exact_vk", "obc_vk") else 0.3
                    weights.append(w * rng.uniform(0.9, 1.1))
                total = sum(weights)
                mean_w = total / BUCKETS
                for b in range(BUCKETS):
                    rows.append([score, window, 0, k, b, b / BUCKETS, (b + 1) / BUCKETS,
                                 weights[b] / total, weights[b] / mean_w * (1 + 3 * (b == 0))])
    return rows


def taylor_rows(rng, n_layers, points):
    rows = []
    for i in range(points):
        layer = i % n_layers
        head = (i // n_layers) % N_KV_HEADS
        position = (i * 37) % N_PROMPT
        obc_v = 10 ** rng.uniform(-8, -1)
        exact_v = obc_v  # zeroing the value row: the Taylor form is exact
        obc_k = 10 ** rng.uniform(-8, -1)
        exact_k = obc_k * 10 ** rng.gauss(0, 0.25)
        obc_vk = obc_v + obc_k
        exact_vk = obc_vk * 10 ** rng.gauss(0, 0.15)
        remove = 10 ** rng.uniform(-8, -1)
        oracle = remove * 10 ** rng.gauss(0, 0.8)
        if i % 97 == 0:  # a masked/zero entry, as real traces have
            oracle = 0.0
        rows.append([layer, head, position, exact_v, obc_v, exact_k, obc_k,
                     exact_vk, obc_vk, remove, oracle])
    return rows


def write_analysis(out, n_layers):
    rng = random.Random(20251007)
    os.makedirs(out, exist_ok=True)
    recall, layers, heads, needle, spearman = [], [], [], [], []
    summary = {}
    for score in SCORES:
        for window in WINDOWS:
            for recent in RECENT:
                for k in TOPK:
                    per_head = []
                    for layer in range(n_layers):
                        layer_vals = []
                        for head in range(N_KV_HEADS):
                            v = recall_value(rng, score, window, recent, k, layer)
                            layer_vals.append(v)
                            per_head.append(v)
                            heads.append([score, window, recent, k, layer, head, v])
                        layers.append([score, window, recent, k, layer,
                                       sum(layer_vals) / len(layer_vals)])
                    mean = sum(per_head) / len(per_head)
                    recall.append([score, window, recent, k, mean, min(per_head), max(per_head)])
                    needle.append([score, window, recent, k,
                                   min(1.0, mean * rng.uniform(0.8, 1.2))])
                    if window == MAIN_WINDOW:
                        summary.setdefault(score, {})["recall@%d/r%d" % (k, recent)] = mean
            rho = QUALITY[score] + rng.uniform(-0.05, 0.05)
            spearman.append([score, window, ORACLE, rho, rho - 0.1, min(1.0, rho + 0.1)])
            counterpart = {"obc_v": "exact_v", "obc_k": "exact_k",
                           "obc_vk": "exact_vk"}.get(score)
            if counterpart:
                r = 1.0 if score == "obc_v" else 0.9 + rng.uniform(-0.05, 0.05)
                spearman.append([score, window, counterpart, r, r - 0.05, min(1.0, r + 0.05)])
    write_csv(os.path.join(out, "recall.csv"),
              "score,window,recent,k,recall_mean,recall_min,recall_max", recall)
    write_csv(os.path.join(out, "recall_layers.csv"),
              "score,window,recent,k,layer,recall", layers)
    write_csv(os.path.join(out, "recall_heads.csv"),
              "score,window,recent,k,layer,kv_head,recall", heads)
    write_csv(os.path.join(out, "spearman.csv"),
              "score,window,reference,rho_mean,rho_min,rho_max", spearman)
    write_csv(os.path.join(out, "needle.csv"), "score,window,recent,k,retention", needle)
    write_csv(os.path.join(out, "bias.csv"),
              "score,window,recent,k,bucket,bucket_lo,bucket_hi,selected_share,mean_norm_score",
              bias_rows(rng))
    write_csv(os.path.join(out, "taylor.csv"),
              "layer,kv_head,position,exact_v,obc_v,exact_k,obc_k,exact_vk,obc_vk,remove,oracle",
              taylor_rows(rng, n_layers, 600))
    files = ["recall.csv", "recall_layers.csv", "recall_heads.csv", "spearman.csv",
             "needle.csv", "bias.csv", "taylor.csv"]
    report = {
        "schema": "obcache-analysis/1",
        "tool_version": "fixture",
        "trace": {"path": "fixture.h5", "model": "fixture-model-6L", "n_layers": n_layers,
                  "n_heads": 8, "n_kv_heads": N_KV_HEADS, "head_dim": 16,
                  "n_prompt": N_PROMPT, "n_decode": 4, "producer": "tests/plots_fixture.py",
                  "needle": {"start": 140, "end": 152}},
        "parameters": {"windows": WINDOWS, "main_window": MAIN_WINDOW, "topk": TOPK, "main_k": 40,
                       "recent": RECENT, "oracle": ORACLE, "gqa": "sum",
                       "maxpool_kernel": 7, "buckets": BUCKETS, "precision": "float",
                       "threads": 1},
        "summary": summary,
        "files": files,
    }
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")


def write_sweep(out):
    rng = random.Random(4096)
    os.makedirs(out, exist_ok=True)
    rows = []
    for length in [512, 1024, 2048, 4096]:
        for depth in [0, 25, 50, 75, 100]:
            for needle in range(2):
                value = "%07d" % rng.randrange(10 ** 7)  # the needle's value, as obcache sweep
                found = 1 if rng.random() < 1.1 - length / 5000.0 - 0.2 * (depth == 50) else 0
                for score in SCORES:
                    recall = min(1.0, QUALITY[score] * rng.uniform(0.85, 1.1))
                    kept = min(1.0, recall * rng.uniform(0.5, 1.2))
                    rows.append([length, depth, value, found, found, score, 40, recall, kept])
    write_csv(os.path.join(out, "summary.csv"),
              "length,depth,needle,found,answer_ok,score,k,recall,needle_kept", rows)


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("analysis", "sweep"):
        sys.stderr.write(__doc__)
        return 2
    if sys.argv[1] == "sweep":
        write_sweep(sys.argv[2])
    else:
        n_layers = int(sys.argv[4]) if len(sys.argv) >= 5 and sys.argv[3] == "--layers" else 6
        write_analysis(sys.argv[2], n_layers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
