#!/usr/bin/env python3
"""Baseline for bench/run_analyze.sh: the scores of `obcache analyze`
computed the way the paper's PyTorch pseudo-code does (A, Z, O of the last w
rows; S_attn = A.pow(2).sum(-2); V_2norm; VO = einsum; VmO_2norm; S_key;
S_joint), transcribed to NumPy in float32 or float64, per (layer, query
head), one window at a time, plus the attention-only scores and the exact
errors in the same vectorised style. Not a test: it times the straightforward
array program that `obcache analyze` replaces, and saves the main window's
quantities (summed over each GQA group) for the agreement check.

usage: analyze_numpy.py TRACE --window W[,W...] [--dtype float32|float64] [--out FILE.npz]
"""
import argparse
import time

import h5py
import numpy as np

NAMES = ["attn", "attn2", "attn_vl1", "obc_v", "obc_k", "obc_vk",
         "exact_v", "exact_k", "exact_vk", "remove"]


def head_scores(key_states, value_states, q, o, lse, positions, scale, w, dt):
    """One query head: key/value_states (s, d) prompt rows; q, o (w, d) and
    lse (w,) of the last w prompt rows at `positions`."""
    s = key_states.shape[0]
    Z = (q @ key_states.T) * dt(scale)                              # (w, s)
    causal = np.arange(s)[None, :] <= positions[:, None]
    Z = np.where(causal, Z, dt(0))
    A = np.where(causal, np.exp(Z - lse[:, None]), dt(0))           # softmax rows via lse
    O = o
    # --- the paper's pseudo-code ---
    S_attn = (A ** 2).sum(-2)
    V_2norm = (value_states ** 2).sum(-1)
    S_value = S_attn * V_2norm
    O_2norm = (O ** 2).sum(-1)
    VO = np.einsum("qd,pd->qp", O, value_states)
    VmO_2norm = O_2norm[:, None] + V_2norm[None, :] - 2 * VO
    S_key = ((A * Z) ** 2 * VmO_2norm).sum(-2)
    VVmO = V_2norm[None, :] - VO
    S_joint = (2 * A ** 2 * Z * VVmO).sum(-2) + S_value + S_key
    # --- attention-only baselines ---
    attn = A.sum(-2)
    attn_vl1 = attn * np.abs(value_states).sum(-1)
    # --- exact errors: o' - o = alpha o + beta v, squared norm expanded ---
    e = np.exp(-lse)[:, None]

    def err(alpha, beta):
        return np.where(causal, alpha ** 2 * O_2norm[:, None] + 2 * alpha * beta * VO
                        + beta ** 2 * V_2norm[None, :], dt(0)).sum(-2)

    r = 1 / (1 - A + e)
    live = np.maximum(1 - A, dt(1e-30))
    return {"attn": attn, "attn2": S_attn, "attn_vl1": attn_vl1, "obc_v": S_value, "obc_k": S_key,
            "obc_vk": S_joint, "exact_v": err(dt(0), -A), "exact_k": err(r - 1, r * (e - A)),
            "exact_vk": err(r - 1, -r * A), "remove": err(A / live, -A / live)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--window", required=True)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--out")
    args = ap.parse_args()
    windows = [int(x) for x in args.window.split(",")]
    dt = np.float32 if args.dtype == "float32" else np.float64
    start = time.time()
    f = h5py.File(args.trace, "r")
    L, H, G = (int(f.attrs[k]) for k in ("n_layers", "n_heads", "n_kv_heads"))
    s, scale = int(f.attrs["n_prompt"]), float(f.attrs["attn_scale"])
    rows = f["row_positions"][()]
    group = H // G
    main = {name: np.zeros((L, G, s)) for name in NAMES}
    for layer in range(L):
        grp = f[f"layers/{layer:03d}"]
        K_all, V_all = grp["K"][()].astype(dt), grp["V"][()].astype(dt)
        Q_all, O_all = grp["Q"][()].astype(dt), grp["O"][()].astype(dt)
        lse_all = grp["lse"][()].astype(dt)
        for g in range(G):
            K, V = K_all[g, :s], V_all[g, :s]
            for w in windows:
                idx = np.nonzero((rows >= s - w) & (rows < s))[0]
                total = None
                for h in range(g * group, (g + 1) * group):
                    sc = head_scores(K, V, Q_all[h, idx], O_all[h, idx], lse_all[h, idx],
                                     rows[idx], scale, w, dt)
                    total = sc if total is None else {k: total[k] + sc[k] for k in total}
                if w == windows[0]:
                    for k in NAMES:
                        main[k][layer, g] = total[k]
    seconds = time.time() - start
    if args.out:
        np.savez(args.out, seconds=seconds, **main)
    print(f"numpy ({args.dtype}): {L} layers x {G} KV heads, s={s}, windows {windows}: "
          f"{seconds:.2f} s")


if __name__ == "__main__":
    main()
