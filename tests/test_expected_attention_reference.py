#!/usr/bin/env python3
"""Independent NumPy reference for the expected_attention preset, written
from NVIDIA kvpress's ExpectedAttentionPress (expected_attention_press.py)
and get_prerope_query_states (utils.py), not from the C code.

It captures a short NIAH trace with every prompt row (--all-rows), so that
the pre-RoPE query of every row can be recovered here: the trace's Q rows are
post-RoPE, rotated by angle position x inv_freq[j] on the pairs of the
trace's rope_layout ("interleaved": (2j, 2j+1), GGUF Llama; "half": (j, j +
d/2), Hugging Face's rotate_half), with inv_freq = rope_theta^(-2j/d) and
the cos/sin rounded to float as the runtime's tables are (runtime/cpu_ops.h);
rotating back gives the query before RoPE. From those it computes, per layer
and query head, kvpress's statistics over rows n_sink = 4 .. n - 1 (mean, and
the covariance of the centred rows divided by their count), the RoPE matrix
averaged over the next 512 positions n .. n + 511 (cos I + sin P, P of the
trace's layout), mu' = R mu, S' = R S R^T, and the scores

  softmax_p(k_p . mu' / sqrt(d) + k_p^T S' k_p / (2 d)) over p >= 4,
  mean over the GQA group, x ||v_p||_2, the first 4 padded with max + 1,

for the agnostic protocol (n = where the question begins). It checks every score elementwise against `obcache evict --score
expected_attention --scores-out` (relative <= 1e-5; see SCORE_RTOL) and the
kept sets at 40% and 10% (identical, except positions whose score ties the
selection boundary within 1e-9 relative, which are counted). Under the
aware protocol the candidates end at the question's end, before the
template tail, and the trace records no query statistics of those rows:
`obcache evict` must refuse with one line that says so. It also checks
the trace's /rope_inv_freq against rope_theta. Without the model, skips."""
import os
import shutil
import subprocess
import sys
import tempfile
from fractions import Fraction

import h5py
import numpy as np

OBCACHE = os.environ.get("OBCACHE", "build/obcache")
MODEL = os.environ.get("OBC_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
TMP = os.environ.get("OBC_TMP", tempfile.gettempdir())
N_SINK = 4
N_FUTURE = 512
# Both sides start from the same stored f32 Q rows and the same f32 cos/sin
# and compute in double; they differ only in the order of double operations
# (C: covariance from the raw sums, sum q q^T / n - mu mu^T; here: the centred
# rows, as kvpress). The moments cancel ~1e-16 x E[q^2] / Var[q] (< 1e3 on
# this model), and a logit error dz changes a softmax score by ~dz relative,
# so the expected error is ~1e-12: 1e-5 (the bound) leaves a margin.
SCORE_RTOL = 1e-5
TIE_RTOL = 1e-9


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)}\n{result.stderr}")
    return result.stdout


def pairs(d, layout):
    """Index pairs (a_j, b_j) that RoPE frequency j rotates."""
    j = np.arange(d // 2)
    if layout == "interleaved":
        return 2 * j, 2 * j + 1
    assert layout == "half", layout
    return j, j + d // 2


def unrotate(q, positions, inv_freq, layout):
    """Pre-RoPE rows of q (rows, d) at positions: the inverse rotation with
    the runtime's float cos/sin."""
    d = q.shape[-1]
    a, b = pairs(d, layout)
    angle = positions[:, None].astype(np.float64) * inv_freq[None, :]
    c = np.cos(angle).astype(np.float32).astype(np.float64)
    s = np.sin(angle).astype(np.float32).astype(np.float64)
    pre = np.empty_like(q)
    pre[:, a] = q[:, a] * c + q[:, b] * s
    pre[:, b] = q[:, b] * c - q[:, a] * s
    return pre


def average_rope(n, inv_freq, d, layout):
    """kvpress apply_avg_rope's R: the mean over positions n .. n+511 of
    cos I + sin P, written for the trace's pair layout."""
    a, b = pairs(d, layout)
    t = np.arange(n, n + N_FUTURE, dtype=np.float64)
    R = np.zeros((N_FUTURE, d, d))
    for j in range(d // 2):
        c, s = np.cos(t * inv_freq[j]), np.sin(t * inv_freq[j])
        R[:, a[j], a[j]] = c
        R[:, b[j], b[j]] = c
        R[:, a[j], b[j]] = -s
        R[:, b[j], a[j]] = s
    return R.mean(0)


def reference_scores(f, n):
    """kvpress ExpectedAttentionPress scores (L, G, n) with q_len = n."""
    a = f.attrs
    L, H, G, d = (int(a[k]) for k in ("n_layers", "n_heads", "n_kv_heads", "head_dim"))
    layout = a["rope_layout"].decode() if isinstance(a["rope_layout"], bytes) else a["rope_layout"]
    theta = float(a["rope_theta"])
    inv_freq = theta ** (-2.0 * np.arange(d // 2) / d)
    stored = f["rope_inv_freq"][()]
    assert np.allclose(stored, inv_freq, rtol=1e-14, atol=0), "rope_inv_freq differs from theta"
    rows = f["row_positions"][()]
    assert list(rows[:n]) == list(range(n)), "the trace must capture every prompt row"
    group = H // G
    R = average_rope(n, inv_freq, d, layout)
    out = np.zeros((L, G, n))
    for l in range(L):
        g_ = f[f"layers/{l:03d}"]
        K, V, Q = (g_[k][()].astype(np.float64) for k in ("K", "V", "Q"))
        scores = np.zeros((H, n - N_SINK))
        for h in range(H):
            q = unrotate(Q[h, N_SINK:n], np.arange(N_SINK, n), inv_freq, layout)
            mu = q.mean(0)
            centred = q - mu
            cov = centred.T @ centred / q.shape[0]
            mu_r, cov_r = R @ mu, R @ cov @ R.T
            k = K[h // group, N_SINK:n]
            z = k @ mu_r / np.sqrt(d) + np.einsum("pi,ij,pj->p", k, cov_r, k) / d / 2
            e = np.exp(z - z.max())
            scores[h] = e / e.sum()
        per_kv = scores.reshape(G, group, n - N_SINK).mean(1)
        per_kv *= np.linalg.norm(V[:, N_SINK:n], axis=-1)
        out[l] = np.pad(per_kv, ((0, 0), (N_SINK, 0)), constant_values=per_kv.max() + 1)
    return out


def top(scores, count):
    order = np.lexsort((np.arange(len(scores)), -scores))
    return set(order[:count].tolist())


def read_scores_csv(path, L, G, n):
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    assert data.shape[0] == L * G * n, f"{path}: {data.shape[0]} rows, expected {L * G * n}"
    return data[:, 3].reshape(L, G, n)


def compare(f, trace_path, mode, work):
    a = f.attrs
    L, G = int(a["n_layers"]), int(a["n_kv_heads"])
    n = int(a["n_prompt"]) if mode == "aware" else int(f["spans/question"][()][0])
    ref = reference_scores(f, n)
    failures = []
    for budget in ("40%", "0.1"):
        keep_path = os.path.join(work, "keep.h5")
        csv_path = os.path.join(work, "scores.csv")
        run([OBCACHE, "evict", trace_path, "--score", "expected_attention", "--budget", budget,
             "--protocol", mode, "-o", keep_path, "--scores-out", csv_path])
        got = read_scores_csv(csv_path, L, G, n)
        rel = np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)
        worst = float(rel.max())
        if worst > SCORE_RTOL:
            l, g, p = np.unravel_index(int(rel.argmax()), rel.shape)
            failures.append(f"{mode}: score[{l}][{g}][{p}] {got[l, g, p]!r} vs {ref[l, g, p]!r} "
                            f"(rel {worst:.2e})")
        with h5py.File(keep_path, "r") as k:
            mask = k["keep"][()][:, :, :n].astype(bool)
        n_kept = int(n * Fraction(budget[:-1]) / 100) if budget.endswith("%") else int(
            n * Fraction(budget))
        want = np.zeros_like(mask)
        for l in range(L):
            for g in range(G):
                want[l, g, sorted(top(ref[l, g], n_kept))] = True
        differ = np.argwhere(mask != want)
        ties = 0
        for l, g, p in differ:
            boundary = np.sort(ref[l, g][want[l, g]])[0]
            if abs(ref[l, g, p] - boundary) <= TIE_RTOL * abs(boundary):
                ties += 1
            else:
                failures.append(f"{mode} {budget}: keep[{l}][{g}][{p}] = {int(mask[l, g, p])}, "
                                f"kvpress {int(want[l, g, p])}")
                break
        print(f"{'ok' if not failures else 'FAIL':5} expected_attention {mode:8} {budget:4} "
              f"max rel {worst:.1e}, {len(differ)} kept positions differ ({ties} at ties)")
    return failures


def main():
    if not os.path.exists(MODEL):
        print(f"SKIP: no model at {MODEL}")
        return 0
    work = tempfile.mkdtemp(prefix="expected_attention_reference.", dir=TMP)
    try:
        path = os.path.join(work, "t.h5")
        run([OBCACHE, "capture", "--length", "384", "--depth", "50", "--haystack", "kjv",
             "--seed", "3", "--all-rows", "--decode", "2", "--model", MODEL, "-o", path])
        failures = []
        with h5py.File(path, "r") as f:
            failures += compare(f, path, "agnostic", work)
        refused = subprocess.run([OBCACHE, "evict", path, "--score", "expected_attention",
                                  "--budget", "40%", "--protocol", "aware", "-o",
                                  os.path.join(work, "aware.h5")], capture_output=True, text=True)
        lines = refused.stderr.strip().splitlines()
        ok = (refused.returncode == 1 and len(lines) == 1 and "rows up to the question's end" in
              lines[0] and not os.path.exists(os.path.join(work, "aware.h5")))
        print(f"{'ok' if ok else 'FAIL':5} expected_attention aware refused: {refused.stderr.strip()}")
        if not ok:
            failures.append("aware: expected a one-line refusal")
        for line in failures:
            print("FAIL ", line)
        print("expected_attention reference:", "FAIL" if failures else "ok")
        return 1 if failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
