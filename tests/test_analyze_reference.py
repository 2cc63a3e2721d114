#!/usr/bin/env python3
"""Independent NumPy reference for `obcache analyze`, written from
docs/SCIENCE.md (from "Notation" to "Recall of the oracle"), not from the C
code: it reads a synthetic trace with h5py only, recomputes every per-token
quantity (attn, attn2, attn_vl1, attn_maxpool, obc_v, obc_k, obc_vk, exact_v, exact_k,
exact_vk, remove) for every window, oracle@1 and oracle@T, and the recall@k of each score (last r prompt
positions plus the k - r best others, ties to the lower position), then
compares them with --scores-out (relative error <= 1e-4 with --precision
float, <= 1e-6 with double; also --gqa max --maxpool-kernel 5) and with recall_heads.csv / recall.csv (exactly
equal, except where the scores tie within rounding at the selection
boundary: allowed and reported), and Spearman's rho (average ranks for
ties) of every score against the oracles and of each Taylor score against its
exact error with spearman.csv. Exits non-zero on any failure."""
import csv
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

OBCACHE = os.environ.get("OBCACHE", "build/obcache")
TMP = os.environ.get("OBC_TMP", tempfile.gettempdir())
NAMES = ["attn", "attn2", "attn_vl1", "attn_maxpool", "obc_v", "obc_k", "obc_vk",
         "exact_v", "exact_k", "exact_vk", "remove"]
WINDOWS = [8, 1, 4, 16, 32]       # first = main window
TOPK = [10, 5, 20, 40]            # first = main budget
RECENT = 4
KERNEL = 7


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)}\n{result.stderr}")
    return result.stdout


def read_trace(path):
    f = h5py.File(path, "r")
    a = f.attrs
    meta = {key: a[key] for key in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "n_prompt",
                                     "n_positions", "attn_scale")}
    meta["row_positions"] = f["row_positions"][()]
    meta["needle"] = f["spans/needle"][()] if "spans" in f and "needle" in f["spans"] else None
    return f, meta


def max_pool(x, kernel):
    half = kernel // 2
    n = len(x)
    return np.array([x[max(0, p - half):min(n, p + half + 1)].max() for p in range(n)])


SCORES = ["attn", "attn2", "attn_vl1", "obc_v", "obc_k", "obc_vk"]
COMBINE = {"sum": lambda x: x.sum(0), "mean": lambda x: x.mean(0), "max": lambda x: x.max(0)}


def pair_attention(z, mask, lse, O, V):
    """A, exp(-lse) (rows, n) and o (rows, n, d) seen by each pair (row, key) of
    logits z (rows, n): from the stored lse and O, except for a key with
    A > 1/2, whose row is recomputed from Q, K, V in float64 (docs/SCIENCE.md:
    there 1 - A and o - v fall below the float32 rounding of lse and O)."""
    zm = np.where(mask, z, -np.inf)
    zmax = zm.max(-1, keepdims=True)
    w = np.exp(zm - zmax)
    l_new = (zmax + np.log(w.sum(-1, keepdims=True)))[:, 0]
    o_new = (w / w.sum(-1, keepdims=True)) @ V
    A_new = np.where(mask, np.exp(z - l_new[:, None]), 0.0)
    dom = A_new > 0.5
    A = np.where(dom, A_new, np.where(mask, np.exp(z - lse[:, None]), 0.0))
    e = np.where(dom, np.exp(-l_new)[:, None], np.exp(-lse)[:, None])
    o = np.where(dom[:, :, None], o_new[:, None, :], O[:, None, :])
    return A, e, o


def head_quantities(K, V, Q, O, lse, rows, s, scale, window, gqa="sum", kernel=KERNEL):
    """Every quantity of SPEC sections 2-3 for one KV head: K, V (n_pos, d);
    Q, O (group, n_rows, d); lse (group, n_rows). Scores of the group's query
    heads combined by `gqa` (attn_maxpool pools the combined attn), exact errors
    always summed as the spec says."""
    idx = np.nonzero((rows >= s - window) & (rows < s))[0]
    assert len(idx) == window
    pos = rows[idx]
    Kp, Vp = K[:s], V[:s]
    v2 = (Vp ** 2).sum(-1)
    v1 = np.abs(Vp).sum(-1)
    total = {name: np.zeros(s) for name in NAMES}
    per_head = {name: [] for name in SCORES}
    for h in range(Q.shape[0]):
        q = Q[h, idx]
        mask = np.arange(s)[None, :] <= pos[:, None]                    # (W, s)
        z = np.where(mask, scale * q @ Kp.T, 0.0)
        A, e, o = pair_attention(z, mask, lse[h, idx], O[h, idx], Vp)   # (W, s), (W, s), (W, s, d)
        vo = (o * Vp[None, :, :]).sum(-1)
        diff = Vp[None, :, :] - o                                       # (W, s, d)
        vmo2 = (diff ** 2).sum(-1)
        per_head["attn"].append(A.sum(0))
        per_head["attn2"].append((A ** 2).sum(0))
        per_head["attn_vl1"].append(A.sum(0) * v1)
        per_head["obc_v"].append((A ** 2).sum(0) * v2)
        per_head["obc_k"].append(((A * z) ** 2 * vmo2).sum(0))
        per_head["obc_vk"].append((A ** 2).sum(0) * v2 + ((A * z) ** 2 * vmo2).sum(0)
                                  + 2 * (A ** 2 * z * (v2[None, :] - vo)).sum(0))
        # Exact errors: perturbed outputs o'_i, error ||o'_i - o_i||^2 for p <= i.
        Ae = A[:, :, None]
        oo = o
        vv = Vp[None, :, :]
        r = 1.0 / (1.0 - A + e)
        d_v = -Ae * vv
        d_k = r[:, :, None] * (oo - Ae * vv) + (r * e)[:, :, None] * vv - oo
        d_vk = r[:, :, None] * (oo - Ae * vv) - oo
        live = 1.0 - A
        safe = np.where(live > 1e-12, live, 1.0)
        d_rm = np.where((live > 1e-12)[:, :, None], (oo - Ae * vv) / safe[:, :, None] - oo, -oo)
        for name, d in (("exact_v", d_v), ("exact_k", d_k), ("exact_vk", d_vk), ("remove", d_rm)):
            total[name] += np.where(mask, (d ** 2).sum(-1), 0.0).sum(0)
    for name in SCORES:
        total[name] = COMBINE[gqa](np.array(per_head[name]))
    total["attn_maxpool"] = max_pool(total["attn"], kernel)
    return total


def head_oracle(K, V, Q, O, lse, rows, s, scale, steps):
    """True eviction error of every prompt token, summed over the first
    `steps` decode rows and the group's query heads."""
    idx = np.nonzero(rows >= s)[0][:steps]
    assert len(idx) == steps
    out = np.zeros(s)
    for h in range(Q.shape[0]):
        for i in idx:
            p_i = rows[i]
            z = scale * K[:p_i + 1] @ Q[h, i]
            A, _, o = pair_attention(z[None, :], np.ones((1, p_i + 1), bool), lse[h, i:i + 1],
                                     O[h, i:i + 1], V[:p_i + 1])
            A, o = A[0, :s], o[0, :s]
            vmo2 = ((V[:s] - o) ** 2).sum(-1)
            out += (A / (1.0 - A)) ** 2 * vmo2
    return out


def ranking(score, n):
    """Positions 0..n-1 best first: higher score, then lower position."""
    return np.lexsort((np.arange(n), -score[:n]))


def selection(score, k, r):
    s = len(score)
    return np.concatenate([ranking(score, s - r)[:k - r], np.arange(s - r, s)])


def boundary_gap(score, k, r):
    """Relative gap between the last selected and the first rejected
    candidate: small means the selection depends on rounding."""
    order = ranking(score, len(score) - r)
    if k - r >= len(order) or k - r == 0:
        return np.inf
    a, b = score[order[k - r - 1]], score[order[k - r]]
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def average_ranks(x):
    """1-based ranks, tied values sharing the mean of their ranks."""
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts          # 0-based first rank of each value
    return (first + (counts + 1) / 2.0)[inverse]


def spearman(x, y):
    return np.corrcoef(average_ranks(x), average_ranks(y))[0, 1]


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def rel_error(ours, ref):
    """Worst of the elementwise relative error (entries above 1e-6 of the
    largest) and the error relative to the largest entry."""
    scale = np.abs(ref).max()
    if scale == 0:
        return float(np.abs(ours).max())
    big = np.abs(ref) > 1e-6 * scale
    elem = (np.abs(ours - ref)[big] / np.abs(ref)[big]).max()
    return max(float(elem), float(np.abs(ours - ref).max() / scale))


def main():
    work = tempfile.mkdtemp(prefix="analyze_ref.", dir=TMP)
    trace = os.path.join(work, "ref.h5")
    run([OBCACHE, "synth", "-o", trace, "--layers", "2", "--heads", "6", "--kv-heads", "2",
         "--head-dim", "32", "--length", "256", "--rows", "32", "--decode", "4", "--seed", "11"])
    f, m = read_trace(trace)
    L, H, G, d, s = (int(m[k]) for k in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "n_prompt"))
    group = H // G
    rows = m["row_positions"]
    scale = float(m["attn_scale"])
    steps_T = int((rows >= s).sum())
    common = ["--window", ",".join(map(str, WINDOWS)), "--topk", ",".join(map(str, TOPK)),
              "--recent", str(RECENT), "--oracle", "T", "--quiet"]
    out_f = os.path.join(work, "float")
    out_d = os.path.join(work, "double")
    run([OBCACHE, "analyze", trace, "-o", out_f, "--scores-out", out_f + ".h5"] + common)
    run([OBCACHE, "analyze", trace, "-o", out_d, "--scores-out", out_d + ".h5",
         "--precision", "double"] + common)

    out_m = os.path.join(work, "max")
    run([OBCACHE, "analyze", trace, "-o", out_m, "--scores-out", out_m + ".h5",
         "--precision", "double", "--gqa", "max", "--maxpool-kernel", "5"] + common)

    windows = sorted(set(WINDOWS))
    ref = {}       # (layer, g) -> {window: quantities}
    ref_max = {}   # (layer, g) -> main-window quantities with --gqa max --maxpool-kernel 5
    oracle1, oracleT = {}, {}
    for layer in range(L):
        grp = f[f"layers/{layer:03d}"]
        for g in range(G):
            K = grp["K"][g].astype(np.float64)
            V = grp["V"][g].astype(np.float64)
            Q = grp["Q"][g * group:(g + 1) * group].astype(np.float64)
            O = grp["O"][g * group:(g + 1) * group].astype(np.float64)
            lse = grp["lse"][g * group:(g + 1) * group].astype(np.float64)
            ref[layer, g] = {w: head_quantities(K, V, Q, O, lse, rows, s, scale, w) for w in windows}
            ref_max[layer, g] = head_quantities(K, V, Q, O, lse, rows, s, scale, WINDOWS[0],
                                                gqa="max", kernel=5)
            oracle1[layer, g] = head_oracle(K, V, Q, O, lse, rows, s, scale, 1)
            oracleT[layer, g] = head_oracle(K, V, Q, O, lse, rows, s, scale, steps_T)

    failures = []
    main_w = WINDOWS[0]
    for label, path, tol in (("float", out_f + ".h5", 1e-4), ("double", out_d + ".h5", 1e-6),
                             ("double, --gqa max --maxpool-kernel 5", out_m + ".h5", 1e-6)):
        with h5py.File(path, "r") as sf:
            if sf.attrs["window"] != main_w or sf.attrs["schema"] != "obcache-scores/1":
                failures.append(f"{path}: attributes window/schema wrong")
            worst = {}
            for name in NAMES + ["oracle@1", "oracle@T"]:
                data = sf[name][()]
                if data.shape != (L, G, s):
                    failures.append(f"{path}:{name} shape {data.shape}, expected {(L, G, s)}")
                    continue
                err = 0.0
                for (layer, g), per_w in ref.items():
                    main_ref = ref_max[layer, g] if "max" in label else per_w[main_w]
                    expect = (oracle1 if name == "oracle@1" else oracleT)[layer, g] \
                        if name.startswith("oracle") else main_ref[name]
                    err = max(err, rel_error(data[layer, g], expect))
                worst[name] = err
                if not err <= tol:
                    failures.append(f"{label}: {name} relative error {err:.3g} > {tol:g}")
            print(f"scores-out ({label}, W={main_w}) vs NumPy: max relative error per quantity: "
                  + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))

    # recall@k per head against recall_heads.csv (float and double runs).
    for label, out in (("float", out_f), ("double", out_d)):
        table = {(r["score"], int(r["window"]), int(r["recent"]), int(r["k"]), int(r["layer"]),
                  int(r["kv_head"])): float(r["recall"])
                 for r in read_csv(os.path.join(out, "recall_heads.csv"))}
        compared, ties = 0, []
        numpy_recall = {}   # (score, window, recent, k) -> per-head NumPy recalls
        for (layer, g), per_w in ref.items():
            orc = oracleT[layer, g]
            for w in windows:
                for name in NAMES:
                    score = per_w[w][name]
                    for r in (0, RECENT):
                        for k in TOPK:
                            key = (name, w, r, k, layer, g)
                            if key not in table:
                                failures.append(f"{label}: recall_heads.csv lacks {key}")
                                continue
                            sel = selection(score, k, r)
                            top = ranking(orc, s)[:k]
                            ours = len(np.intersect1d(sel, top)) / k
                            numpy_recall.setdefault(key[:4], []).append(ours)
                            compared += 1
                            if ours == table[key]:
                                continue
                            gap = min(boundary_gap(score, k, r), boundary_gap(orc, k, 0))
                            if gap < 1e-4:
                                ties.append((key, ours, table[key], gap))
                            else:
                                failures.append(f"{label}: recall {key}: NumPy {ours}, obcache "
                                                f"{table[key]} (boundary gap {gap:.2e})")
        print(f"recall_heads.csv ({label}): {compared} (score, window, recent, k, head) cells "
              f"compared, {len(ties)} differ at a near-tie (allowed)")
        for t in ties:
            print(f"  near tie: {t[0]} NumPy {t[1]} obcache {t[2]} relative gap {t[3]:.2e}")
        # recall.csv: the mean over heads, against NumPy's own mean (exact up
        # to the %.9g printing unless a near tie was reported above).
        worst, rows = 0.0, 0
        tied = {t[0][:4] for t in ties}
        for row in read_csv(os.path.join(out, "recall.csv")):
            if row["reference"] != "oracle@T":  # the --oracle T rows; oracle@1 has its own
                continue
            key = (row["score"], int(row["window"]), int(row["recent"]), int(row["k"]))
            rows += 1
            if key not in numpy_recall:
                failures.append(f"{label}: recall.csv has {key}, NumPy does not")
                continue
            diff = abs(np.mean(numpy_recall[key]) - float(row["recall_mean"]))
            if key not in tied:
                worst = max(worst, diff)
        print(f"recall.csv ({label}): {rows} rows, max |NumPy mean - recall_mean| = {worst:.2e} "
              f"(rows with a near tie excluded: {len(tied)})")
        if rows != len(numpy_recall):
            failures.append(f"{label}: recall.csv has {rows} rows, expected {len(numpy_recall)}")
        if worst > 1e-8:
            failures.append(f"{label}: recall.csv differs from the NumPy mean by {worst:.2e}")

    # spearman.csv: mean over heads of rho(score, reference) for every window.
    exact_of = {"obc_v": "exact_v", "obc_k": "exact_k", "obc_vk": "exact_vk"}
    for label, out, tol in (("float", out_f, 1e-4), ("double", out_d, 1e-9)):
        worst, rows = 0.0, 0
        for row in read_csv(os.path.join(out, "spearman.csv")):
            name, w, reference = row["score"], int(row["window"]), row["reference"]
            if reference not in ("oracle@1", "oracle@T") and exact_of.get(name) != reference:
                failures.append(f"{label}: spearman.csv pairs {name} with {reference}")
                continue
            rhos = []
            for head, per_w in ref.items():
                other = (oracle1 if reference == "oracle@1" else oracleT)[head] \
                    if reference.startswith("oracle") else per_w[w][reference]
                rhos.append(spearman(per_w[w][name], other))
            worst = max(worst, abs(np.mean(rhos) - float(row["rho_mean"])))
            rows += 1
        expected = len(windows) * (2 * len(NAMES) + 3)
        print(f"spearman.csv ({label}): {rows} rows, max |NumPy - rho_mean| = {worst:.2e}")
        if rows != expected:
            failures.append(f"{label}: spearman.csv has {rows} rows, expected {expected}")
        if not worst <= tol:
            failures.append(f"{label}: spearman.csv differs from NumPy by {worst:.2e} > {tol:g}")

    if failures:
        print("FAILED:\n  " + "\n  ".join(failures[:40]))
        return 1
    shutil.rmtree(work)
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
