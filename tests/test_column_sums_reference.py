#!/usr/bin/env python3
"""The column sums of `obcache capture` (traces/SCHEMA.md "Column sums")
against h5py and NumPy: a short capture with every prompt row captured
(--all-rows) holds Q, O and lse of each row, so the sums over all prompt
rows, and over the rows before the question, are recomputed from them in
double and compared elementwise:
  attn = sum_i A_ip, obc_v = sum_i A_ip^2 ||v_p||^2,
  obc_k = sum_i (A_ip z_ip)^2 ||v_p - o_i||^2,
  obc_vk = sum_i A_ip^2 ||v_p + z_ip (v_p - o_i)||^2,
and the counts exactly; and the content hash of a small capture with column
sums (schema 3) is recomputed from its bytes (test_trace_readable.content_hash).

Tolerance, element by element, from the arithmetic of the capture
(capture/capture_sums.c; u = 2^-24, gamma_d = d u / (1 - d u)): its logit z
is a float sgemm, off by at most dz = gamma_d scale sum_c |q_c k_c| + u |z|;
z - lse is rounded once more (u |z - lse|) and its exp is good to E = 1.2e-7
relative (runtime/cpu_ops.h), so A is off by at most
da = A ((1 + E) exp(dz + u |z - lse|) - 1). v.o is a float sgemm too
(dw = gamma_d sum_c |v_c o_c|) and ||v||^2 is rounded to float (u vv); dd =
vv - 2 v.o + oo and vd = vv - v.o, formed in float, are then off by at most
2 dw + 4 u (vv + 2|v.o| + oo) and dw + 3 u (vv + |v.o|). Each pair's term is
a product of those factors, off by at most prod(|f| + df) - prod |f|, plus
its own float roundings (at most 6, each u of a magnitude no larger than
a^2 (vv + z^2 dd + 2 |z vd|) or, for attn, a). The terms are summed over
blocks of at most 64 rows in float (63 u of the sum of their magnitudes),
then in double (1e-12 of it, with the reference's own double arithmetic),
and stored as f32 (u |S|). The bound of each element is the sum of these.
Exits non-zero on any difference."""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_trace_readable import content_hash  # noqa: E402  (SCHEMA.md's definition)

OBCACHE = os.environ["OBCACHE"]
TMP = os.environ.get("OBC_TMP", "/tmp")
U = 2.0**-24
EXP_ERROR = 1.2e-7
failures = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        failures.append(name)


def head_sums(q, k, v, o, lse, scale, rows_end):
    """Reference sums and their error bounds over rows [0, rows_end) of one
    query head: q, o (s, d); k, v (s, d); lse (s,). Returns two dicts
    name -> (s,) arrays."""
    s, d = q.shape
    gamma = d * U / (1 - d * U)
    q, o, lse = q[:rows_end], o[:rows_end], lse[:rows_end]
    z = scale * (q @ k.T)                                  # (rows, s)
    dz = gamma * scale * (np.abs(q) @ np.abs(k).T) + U * np.abs(z)
    causal = np.tril(np.ones((rows_end, s), dtype=bool))
    x = z - lse[:, None]
    a = np.where(causal, np.exp(np.minimum(x, 0.0)), 0.0)
    da = a * ((1 + EXP_ERROR) * np.exp(dz + U * np.abs(x)) - 1)
    vv = np.einsum("pc,pc->p", v, v)[None, :]
    dvv = U * vv
    oo = np.einsum("ic,ic->i", o, o)[:, None]
    w = o @ v.T
    dw = gamma * (np.abs(o) @ np.abs(v).T)
    dd = np.maximum(vv - 2 * w + oo, 0.0)                  # ||v_p - o_i||^2
    vd = vv - w                                            # v_p.(v_p - o_i)
    ddd = 2 * dw + 4 * U * (vv + 2 * np.abs(w) + oo)
    dvd = dw + 3 * U * (vv + np.abs(w))
    ax, adz = np.abs(z), dz

    def grow(*pairs):
        """prod(|f| + df) - prod(|f|) over the (f, df) pairs."""
        hi, lo = 1.0, 1.0
        for f, df in pairs:
            hi = hi * (np.abs(f) + df)
            lo = lo * np.abs(f)
        return hi - lo

    m = vv + z * z * dd + 2 * z * vd                       # ||v + z (v - o)||^2
    dm = dvv + grow((ax, adz), (ax, adz), (dd, ddd)) + 2 * grow((ax, adz), (vd, dvd))
    magnitude = a * a * (vv + z * z * dd + 2 * np.abs(z * vd))
    terms = {
        "attn": (a, da + U * a),
        "obc_v": (a * a * vv, grow((a, da), (a, da), (vv, dvv)) + 6 * U * magnitude),
        "obc_k": (a * a * z * z * dd, grow((a, da), (a, da), (ax, adz), (ax, adz), (dd, ddd))
                  + 6 * U * magnitude),
        "obc_vk": (a * a * m, grow((a, da), (a, da), (m, dm)) + 6 * U * magnitude),
    }
    ref, bound = {}, {}
    for name, (t, dt) in terms.items():
        t = np.where(causal, t, 0.0)
        dt = np.where(causal, dt, 0.0)
        ref[name] = t.sum(axis=0)
        bound[name] = (dt.sum(axis=0) + (63 * U + 1e-12) * np.abs(t).sum(axis=0)
                       + U * np.abs(t.sum(axis=0)))
    return ref, bound


def main():
    path = os.path.join(TMP, "column_sums_reference.h5")
    subprocess.run([OBCACHE, "capture", "--length", "200", "--depth", "50", "--haystack", "kjv",
                    "--seed", "3", "--all-rows", "--decode", "2", "-o", path],
                   check=True, stdout=subprocess.DEVNULL)
    try:
        with h5py.File(path, "r") as f:
            compare(f)
    finally:
        os.remove(path)
    small = os.path.join(TMP, "column_sums_hash.h5")
    subprocess.run([OBCACHE, "capture", "--length", "128", "--depth", "50", "--haystack", "kjv",
                    "--seed", "3", "--rows", "1", "--decode", "1", "-o", small],
                   check=True, stdout=subprocess.DEVNULL)
    try:
        with h5py.File(small, "r") as f:
            recorded, computed = f.attrs["content_hash"].decode(), content_hash(f)
            check("content hash of a schema-3 trace recomputed", recorded == computed,
                  f"recorded {recorded}, recomputed {computed}")
    finally:
        os.remove(small)
    if failures:
        print(f"{len(failures)} checks failed: {', '.join(failures)}")
        return 1
    print("all column sum reference checks passed")
    return 0


def compare(f):
    at = f.attrs
    s, heads, kv_heads = int(at["n_prompt"]), int(at["n_heads"]), int(at["n_kv_heads"])
    scale, agnostic = float(at["attn_scale"]), int(at["agnostic_rows"])
    check("schema version 3 with column sums", int(at["schema_version"]) == 3
          and int(at["has_column_sums"]) == 1)
    q_begin = int(f["spans/question"][0])
    check("agnostic rows end at the question", agnostic == q_begin and 0 < agnostic < s,
          f"{agnostic} vs question at {q_begin} of {s}")
    rows = f["row_positions"][()]
    check("every prompt row captured", np.array_equal(rows[:s], np.arange(s)))
    counts = f["column_counts"][()]
    p = np.arange(s)
    check("counts exact", np.array_equal(counts[0], np.maximum(agnostic - p, 0))
          and np.array_equal(counts[1], s - p))
    worst = {}
    for layer in range(int(at["n_layers"])):
        g = f[f"layers/{layer:03d}"]
        K, V = (g[n][()].astype(np.float64) for n in "KV")
        Q, O = (g[n][()].astype(np.float64) for n in "QO")
        lse = g["lse"][()].astype(np.float64)
        stored = {n: g[f"col_{n}"][()].astype(np.float64) for n in
                  ("attn", "obc_v", "obc_k", "obc_vk")}
        for h in range(heads):
            kv = h // (heads // kv_heads)
            for variant, end in ((0, agnostic), (1, s)):
                ref, bound = head_sums(Q[h, :s], K[kv, :s], V[kv, :s], O[h, :s], lse[h, :s],
                                       scale, end)
                for name in ref:
                    err = np.abs(stored[name][variant, h] - ref[name])
                    ratio = np.max(err / np.maximum(bound[name], 1e-300))
                    key = (name, variant)
                    if ratio > worst.get(key, (-1,))[0]:
                        worst[key] = (ratio, layer, h, int(np.argmax(err / np.maximum(
                            bound[name], 1e-300))), float(np.max(err)))
    for (name, variant), (ratio, layer, h, pos, err) in sorted(worst.items()):
        check(f"{name} ({'agnostic' if variant == 0 else 'all'} rows) within its bound",
              ratio <= 1.0, f"worst error/bound {ratio:.3g} (layer {layer}, head {h}, "
              f"position {pos}; largest error {err:.3g})")


if __name__ == "__main__":
    sys.exit(main())
