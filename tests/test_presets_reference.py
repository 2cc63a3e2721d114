#!/usr/bin/env python3
"""Independent NumPy reference for the eviction presets (evict/preset.h),
written from NVIDIA kvpress's presses (scorer_press.py, snapkv_press.py,
tova_press.py, pyramidkv_press.py, adakv_press.py, criticalkv_press.py,
streaming_llm_press.py, knorm_press.py, keydiff_press.py,
observed_attention_press.py), from the H2O paper (arXiv 2306.14048: heavy
hitters by accumulated attention, the budget split into equal heavy and
recent halves) and the OBCache paper (arXiv 2510.07651: a KV head's score
is the sum over its query group; its H2O keeps num_hh heavy hitters by
topk beside num_recent recent tokens; tova-group is TOVA's score in that
form), and the OBCache closed forms of docs/SPEC.md section 2, not from
the C code. It captures a real 512-token
NIAH trace with the default model, runs `obcache evict --score PRESET
--scores-out` for every preset and both protocols (aware: candidates end
at the question's end, kvpress's query-aware compression of context and
question, the template tail after it kept; agnostic: candidates end where
the question begins), and checks

- every per-token score elementwise (relative error <= 1e-5; both sides are
  double, so the error seen is ~1e-13);
- the kept sets (the keep file's mask) against kvpress's selection: equal,
  except positions whose score ties the selection boundary within 1e-9
  (relative), which are allowed and counted.

StreamingLLM's kvpress score depends on the budget (ones, zeros after the 4
sinks); obcache writes the budget-free ranking with the same top-k (sinks,
then position), so only its kept sets are compared with kvpress's.

CriticalKV's score depends on the budget (its first stage): obcache writes
the budget's final score, and the reference computes it from the SnapKV
score and W_o read from the GGUF file with the `gguf` package (dequantised
by gguf.quants, not by obcache). A position whose SnapKV score ties the
first stage's boundary within 1e-9 may fall on either side of it; such
positions are allowed and counted. criticalkv-adakv follows
CriticalAdaKVPress.compress step by step (safeguard, head budgets, the two
stages inside each head's budget): its final scores, every head's budget
and the kept sets are compared.

adakv-vatp is VATP (arXiv 2406.12335: the method's own token score times
||v_p||_1) on AdaKV(SnapKV): SnapKV's pooled score times the value's l1
norm, the window's max+1 after, AdaKV's selection.

With --trace PATH --score S --budget B --protocol M it compares one preset on a
given trace and prints the share of kept positions that agree with the
reference. Exits non-zero on any failure; without the model, skips."""
import argparse
import csv
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
SCORE_RTOL = 1e-5
TIE_RTOL = 1e-9

# name -> (kvpress class or published method, window, pooling, kernel, heads, value_l1,
#          allocation)
PRESETS = {
    "h2o": ("H2O (heavy hitters + recent half)", 0, None, 0, "group-sum", False, "h2o"),
    "observed-attention": ("ObservedAttentionPress", 0, None, 0, "group", False, "uniform"),
    "tova": ("TOVAPress", 1, None, 0, "layer", False, "uniform"),
    "tova-group": ("TOVA, OBCache's GQA sum", 1, None, 0, "group-sum", False, "uniform"),
    "snapkv": ("SnapKVPress", 64, "avg", 5, "group", False, "uniform"),
    "snapkv-max7": ("SnapKVPress, max pooling 7 (OBCache authors)", 16, "max", 7, "group", False,
                    "uniform"),
    "pyramidkv": ("PyramidKVPress", 64, "avg", 5, "group", False, "pyramid"),
    "adakv-snapkv": ("AdaKVPress(SnapKVPress)", 64, "avg", 5, "group", False, "adakv"),
    "criticalkv-snapkv": ("CriticalKVPress(SnapKVPress)", 64, "avg", 5, "group", False,
                          "critical"),
    "vatp": ("VATP (window attention x ||v||_1)", 64, None, 0, "group", True, "uniform"),
    "streaming": ("StreamingLLMPress", 0, None, 0, None, False, "uniform"),
    "knorm": ("KnormPress", 0, None, 0, None, False, "uniform"),
    "keydiff": ("KeyDiffPress", 0, None, 0, None, False, "uniform"),
    # The paper's value-aware baselines on AdaKV (its Fig. 4).
    "adakv-vatp": ("AdaKVPress(SnapKVPress) x ||v||_1 (VATP)", 64, "avg", 5, "group", True,
                   "adakv"),
    "criticalkv-adakv": ("CriticalAdaKVPress(SnapKVPress)", 64, "avg", 5, "group", False,
                         "critical-adakv"),
}
PAIRED = ["h2o+obc_vk", "h2o+obc_k", "observed-attention+obc_vk", "observed-attention+obc_v",
          "tova+obc_k", "tova-group+obc_vk", "snapkv+obc_vk", "snapkv-max7+obc_v",
          "adakv-snapkv+obc_k", "pyramidkv+obc_vk", "adakv-vatp+obc_v", "criticalkv-adakv+obc_k"]


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)}\n{result.stderr}")
    return result.stdout


def parse_name(name):
    """(base preset entry, inner score) of "NAME[+obc_x]"."""
    base, _, inner = name.partition("+")
    return PRESETS[base], inner or "attn"


class Trace:
    def __init__(self, path):
        self.f = h5py.File(path, "r")
        a = self.f.attrs
        self.L, self.H, self.G = int(a["n_layers"]), int(a["n_heads"]), int(a["n_kv_heads"])
        self.d, self.s = int(a["head_dim"]), int(a["n_prompt"])
        self.scale = float(a["attn_scale"])
        self.rows = {int(p): i for i, p in enumerate(self.f["row_positions"][()])}
        self.question, self.question_end = (int(x) for x in self.f["spans/question"][()])
        self._wo = None
        self._layers = {}
        # Every score depends on the preset and the candidates, not on the
        # budget: each is computed once and shared by both budgets
        # (read-only, so that no caller can change another's reference).
        self._scores = {}
        self._norms = {}
        self._windows = {}

    def wo(self):
        if self._wo is None:
            self._wo = output_projections(MODEL)
        return self._wo

    def layer(self, l):
        if l not in self._layers:
            g = self.f[f"layers/{l:03d}"]
            arrays = tuple(g[x][()].astype(np.float64) for x in ("K", "V", "Q"))
            for a in arrays:
                a.flags.writeable = False
            self._layers[l] = arrays
        return self._layers[l]

    def window(self, l, n, W, inner):
        """window_quantities of layer l, n and W: the quantity `inner`,
        computed once for every preset that reads it."""
        obc = inner != "attn"
        if (l, n, W, obc) not in self._windows:
            K, V, Q = self.layer(l)
            group = self.H // self.G
            out = window_quantities(K, V, Q, self.rows, self.scale, group, n, W, obc)
            for a in out.values():
                a.flags.writeable = False
            self._windows[l, n, W, obc] = out
        return self._windows[l, n, W, obc][inner]

    def scores(self, name, n):
        """preset_scores(self, name, n), computed once."""
        if (name, n) not in self._scores:
            out = preset_scores(self, name, n)
            out.flags.writeable = False
            self._scores[name, n] = out
        return self._scores[name, n]

    def norms(self, n):
        """projected_norms(self, n, W_o), computed once."""
        if n not in self._norms:
            out = projected_norms(self, n, self.wo())
            out.flags.writeable = False
            self._norms[n] = out
        return self._norms[n]


def window_quantities(K, V, Q, rows, scale, group, n, W, obc):
    """kvpress compute_window_attention for the last W of n queries (softmax
    over all n keys with the causal mask inside the window), per query head:
    "attn" = the mean over the W rows (SnapKVPress.score); with obc, also
    "obc_v", "obc_k" and "obc_vk", the sums of SPEC.md section 2 over the
    same rows. Columns [0, n - W). A dict of (H, n - W) arrays."""
    H = Q.shape[0]
    names = ("attn", "obc_v", "obc_k", "obc_vk") if obc else ("attn",)
    out = {name: np.zeros((H, n - W)) for name in names}
    for h in range(H):
        k, v = K[h // group, :n], V[h // group, :n]
        q = Q[h, [rows[t] for t in range(n - W, n)]]
        z = scale * (q @ k.T)                                    # (W, n)
        mask = np.triu(np.ones((W, n), dtype=bool), k=n - W + 1)  # key j > query position
        z_m = np.where(mask, -np.inf, z)
        a = np.exp(z_m - z_m.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        out["attn"][h] = a.mean(0)[: n - W]
        if not obc:
            continue
        o = a @ v                                                # (W, d)
        vv = (v * v).sum(-1)                                     # (n,)
        dd = ((v[None, :, :] - o[:, None, :]) ** 2).sum(-1)      # (W, n)
        vo = o @ v.T                                             # (W, n)
        z0 = np.where(mask, 0.0, z)
        value = (a ** 2 * vv[None, :]).sum(0)
        key = ((a * z0) ** 2 * dd).sum(0)
        cross = (2 * a ** 2 * z0 * (vv[None, :] - vo)).sum(0)
        out["obc_v"][h] = value[: n - W]
        out["obc_k"][h] = key[: n - W]
        out["obc_vk"][h] = (value + key + cross)[: n - W]
    return out


def pool(x, kind, kernel):
    """torch avg_pool1d (zero padding, count_include_pad) or max_pool1d
    (padding -inf), stride 1, padding kernel // 2."""
    half = kernel // 2
    if kind == "avg":
        padded = np.concatenate([np.zeros(half), x, np.zeros(half)])
        return np.array([padded[p:p + kernel].sum() / kernel for p in range(len(x))])
    padded = np.concatenate([np.full(half, -np.inf), x, np.full(half, -np.inf)])
    return np.array([padded[p:p + kernel].max() for p in range(len(x))])


def preset_scores(trace, name, n):
    """Scores (L, G, n) of a preset over candidates [0, n)."""
    (press, W, pooling, kernel, heads, value_l1, _), inner = parse_name(name)
    group = trace.H // trace.G
    out = np.zeros((trace.L, trace.G, n))
    for l in range(trace.L):
        K, V, Q = trace.layer(l)
        if press == "KnormPress":
            out[l] = -np.linalg.norm(K[:, :n], axis=-1)
            continue
        if press == "KeyDiffPress":
            k = K[:, :n]
            unit = k / np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), 1e-12)
            anchor = unit.mean(1, keepdims=True)
            cos = (k * anchor).sum(-1) / np.maximum(
                np.linalg.norm(k, axis=-1) * np.linalg.norm(anchor, axis=-1), 1e-8)
            out[l] = -cos
            continue
        if W == 0 and heads is not None:
            # Column sums over every prompt row: the capture's (its own
            # reference test, test_column_sums_reference.py, recomputes them
            # from Q and K); plane 0 holds the rows before the question
            # (query-agnostic), plane 1 every prompt row. Query-aware sums
            # end at the question's end: every row's less those of the
            # template tail's rows [n, s), computed here from the captured
            # rows as SnapKV's window quantity over them.
            plane = 0 if n == trace.question else 1
            dataset = "col_attn" if inner == "attn" else "col_" + inner
            sums = trace.f[f"layers/{l:03d}/{dataset}"][plane].astype(np.float64)[:, :n]
            if plane == 1 and n < trace.s:
                tail = trace.s - n
                less = trace.window(l, trace.s, tail, inner)
                sums = sums - (less * tail if inner == "attn" else less)
            if press == "ObservedAttentionPress":
                # kvpress: divided by the n - p rows that could attend p, mean
                # over the group.
                per_head = sums / np.arange(n, 0, -1, dtype=np.float64)
                out[l] = per_head.reshape(trace.G, group, n).mean(1)
            else:
                # H2O: the accumulated sum itself, summed over the group.
                out[l] = sums.reshape(trace.G, group, n).sum(1)
            continue
        if press == "StreamingLLMPress":
            out[l] = np.where(np.arange(n) < 4, float(n), np.arange(n, dtype=float))[None, :]
            continue
        per_head = trace.window(l, n, W, inner)
        if inner != "attn":
            # a pairing scores on its baseline's scale: the mean over the
            # window's rows, as kvpress's attention (CriticalKV adds 1e-4)
            per_head = per_head / W
        if pooling:
            per_head = np.stack([pool(x, pooling, kernel) for x in per_head])
        if value_l1:
            # VATP (arXiv 2406.12335): the method's token score S_p (here
            # SnapKV's, pooled) times ||v_p||_1, before the window's max+1
            per_head = per_head * np.abs(V[np.arange(trace.H) // group, :n - W]).sum(-1)
        if heads == "layer":   # TOVA: mean over all heads, repeated for every KV head
            scores = np.repeat(per_head.mean(0, keepdims=True), trace.G, 0)
        elif heads == "group-sum":  # OBCache's GQA form: sum over the KV head's group
            scores = per_head.reshape(trace.G, group, n - W).sum(1)
        else:                  # mean over the KV head's group
            scores = per_head.reshape(trace.G, group, n - W).mean(1)
        out[l] = np.pad(scores, ((0, 0), (0, W)), constant_values=scores.max() + 1)
    return out


def output_projections(path):
    """Every layer's attention output projection W_o (dim, n_heads *
    head_dim), dequantised from the GGUF file by the gguf package."""
    import gguf

    reader = gguf.GGUFReader(path)
    out = {}
    for t in reader.tensors:
        if t.name.endswith(".attn_output.weight"):
            data = gguf.quants.dequantize(t.data, t.tensor_type)
            shape = [int(x) for x in reversed(t.shape)]  # fastest dimension first in GGUF
            out[int(t.name.split(".")[1])] = np.asarray(data, dtype=np.float64).reshape(shape)
    return [out[l] for l in sorted(out)]


def projected_norms(trace, n, wo):
    """kvpress CriticalKVPress.vwl1norm: per query head h, ||v_p W_o^T[h]||_1
    with W_o^T viewed (n_heads, head_dim, dim) and v repeated per query
    head, then the mean over the KV head's group. (L, G, n)."""
    group = trace.H // trace.G
    out = np.zeros((trace.L, trace.G, n))
    for l in range(trace.L):
        _, V, _ = trace.layer(l)
        wo_t = wo[l].T.reshape(trace.H, trace.d, -1)
        per_head = np.stack([np.abs(V[h // group, :n] @ wo_t[h]).sum(-1) for h in range(trace.H)])
        out[l] = per_head.reshape(trace.G, group, n).mean(1)
    return out


def critical_scores(base, norms, n_kept):
    """kvpress CriticalKVPress.score: the top int(n_kept * 0.5) by the base
    score set to the float maximum, every other (base + 1e-4) x the norm;
    also the first stage's boundary score per head."""
    first = int(n_kept * 0.5)
    scores = (base + 1e-4) * norms
    boundary = np.full(base.shape[:2], np.inf)
    for l, g in np.ndindex(*base.shape[:2]):
        chosen = sorted(top(base[l, g], first))
        scores[l, g, chosen] = np.finfo(np.float64).max
        if chosen:
            boundary[l, g] = base[l, g, chosen].min()
    return scores, boundary


def critical_adakv_scores(base, norms, n_kept):
    """kvpress CriticalAdaKVPress.compress up to its bottom-k across heads,
    per layer: the top int(n_kept * 0.2) of each head by the base score set
    to the float maximum (the safeguard); each head's budget its count among
    the layer's top n_kept * G of those scores; the top int(budget * 0.5) of
    each head (safeguarded scores) set to the maximum; then (scores + 1e-4)
    x the norm, the top budget of each head set to the maximum. Returns the
    scores (L, G, n) and the head budgets (L, G)."""
    big = np.finfo(np.float64).max
    L, G, n = base.shape
    n_safe = int(n_kept * 0.20)
    out = np.zeros_like(base)
    budgets = np.zeros((L, G), dtype=np.int64)
    heads, positions = np.divmod(np.arange(G * n), n)
    for l in range(L):
        s = base[l].copy()
        for g in range(G):
            s[g, sorted(top(s[g], n_safe))] = big
        order = np.lexsort((positions, heads, -s.reshape(-1)))
        budget = np.bincount(heads[order[:n_kept * G]], minlength=G)
        for g in range(G):
            s[g, sorted(top(s[g], int(budget[g] * 0.5)))] = big
        with np.errstate(over="ignore"):  # big x norm > 1 is inf, as in kvpress's floats
            s = (s + 1e-4) * norms[l]
        for g in range(G):
            s[g, sorted(top(s[g], int(budget[g])))] = big
        out[l] = s
        budgets[l] = budget
    return out, budgets


def ratio(budget):
    """The kept fraction B = 1 - compression_ratio as an exact Fraction, and
    whether the budget is tokens. kvpress's int(n * (1 - compression_ratio))
    in floats can keep one fewer (1 - 0.9 = 0.09999999999999998); obcache
    keeps floor(n x B) exactly, and so does this reference."""
    if budget.endswith("%"):
        return Fraction(budget[:-1]) / 100, False
    if "." in budget:
        return Fraction(budget), False
    return int(budget), True


def pyramid_budget(q_len, kept_mean, window, n_layers, layer):
    """kvpress PyramidKVPress.get_layer_budget (beta 20); kept_mean is its
    q_len * (1 - compression_ratio)."""
    beta = 20
    max_capacity_prompt = window + kept_mean
    min_num = (max_capacity_prompt - window) / beta
    max_num = (max_capacity_prompt - window) * 2 - min_num
    if max_num >= q_len - window:
        max_num = q_len - window
        min_num = (max_capacity_prompt - window) * 2 - max_num
    if not (q_len >= max_num >= min_num >= window):
        return round(kept_mean)
    steps = (max_num - min_num) / (n_layers - 1)
    return round(max_num - layer * steps)


def top(scores, count):
    """The count best positions, ties to the lower position (a fixed order
    where torch.topk leaves ties unspecified)."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    return set(order[:count].tolist())


def kvpress_keep(scores, name, n, budget):
    """kvpress's kept positions (L, G, n) of candidates [0, n)."""
    (press, W, _, _, _, _, allocation), _ = parse_name(name)
    keep, tokens = ratio(budget)
    L, G, _ = scores.shape
    n_kept = keep if tokens else int(n * keep)  # floor of an exact Fraction
    mask = np.zeros((L, G, n), dtype=bool)
    for l in range(L):
        if press == "StreamingLLMPress":
            n_pruned = n - n_kept
            s = np.ones(n)
            s[4:4 + n_pruned] = 0
            for g in range(G):
                mask[l, g, sorted(top(s, n_kept))] = True
            continue
        if allocation == "critical-adakv":  # the bottom-k across the layer's heads
            flat = scores[l].reshape(-1)
            heads, positions = np.divmod(np.arange(G * n), n)
            order = np.lexsort((positions, heads, -flat))
            mask[l].reshape(-1)[order[:G * n_kept]] = True
            continue
        if allocation == "adakv":
            s = scores[l].copy()
            n_safe = int(n_kept * 0.20)
            for g in range(G):
                s[g, sorted(top(s[g], n_safe))] = np.finfo(np.float64).max
            flat = s.reshape(-1)
            heads, positions = np.divmod(np.arange(G * n), n)
            order = np.lexsort((positions, heads, -flat))
            mask[l].reshape(-1)[order[:G * n_kept]] = True
            continue
        if allocation == "h2o":
            # H2O: the last n_kept // 2 candidates (the recent half), then the
            # n_kept - n_kept // 2 heavy hitters by score among the others.
            recent = n_kept // 2
            for g in range(G):
                heavy = top(scores[l, g, :n - recent], n_kept - recent)
                mask[l, g, sorted(heavy)] = True
                mask[l, g, n - recent:] = True
            continue
        count = n_kept
        if allocation == "pyramid":
            count = pyramid_budget(n, float(n * keep), W, L, l)
        for g in range(G):
            mask[l, g, sorted(top(scores[l, g], count))] = True
    return mask


def read_scores_csv(path, L, G, n):
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    assert data.shape[0] == L * G * n, f"{path}: {data.shape[0]} rows, expected {L * G * n}"
    return data[:, 3].reshape(L, G, n)


def compare(trace, trace_path, name, budget, mode, work, report_agreement=False):
    """One preset at one budget and protocol; returns the failures."""
    n = trace.question_end if mode == "aware" else trace.question
    keep_path = os.path.join(work, "keep.h5")
    csv_path = os.path.join(work, "scores.csv")
    run([OBCACHE, "evict", trace_path, "--score", name, "--budget", budget, "--protocol", mode,
         "-o", keep_path, "--scores-out", csv_path, "--model", MODEL])
    got = read_scores_csv(csv_path, trace.L, trace.G, n)
    ref = trace.scores(name, n)
    failures = []
    first_ties = 0
    if parse_name(name)[0][6] == "critical-adakv":
        keep, tokens = ratio(budget)
        n_kept = keep if tokens else int(n * keep)
        ref, budgets = critical_adakv_scores(ref, trace.norms(n), n_kept)
        counts = (got == np.finfo(np.float64).max).sum(-1)
        if (counts != budgets).any():
            l, g = np.argwhere(counts != budgets)[0]
            failures.append(f"{name} {mode} {budget}: layer {l} head {g} keeps {counts[l, g]}, "
                            f"kvpress's head budget {budgets[l, g]}")
    if parse_name(name)[0][6] == "critical":
        keep, tokens = ratio(budget)
        base = ref
        n_kept = keep if tokens else int(n * keep)
        ref, boundary = critical_scores(base, trace.norms(n), n_kept)
        top_got, top_ref = got == np.finfo(np.float64).max, ref == np.finfo(np.float64).max
        counts = top_got.sum(-1)
        if (counts != int(n_kept * 0.5)).any():
            failures.append(f"{name} {mode} {budget}: first stage keeps {counts.min()}.."
                            f"{counts.max()} per head, kvpress {int(n_kept * 0.5)}")
        # Either side of the first stage's boundary at a near-tie (not an exact
        # one: both sides break those by position): take obcache's side.
        gap = np.abs(base - boundary[..., None])
        near = (gap > 0) & (gap <= TIE_RTOL * np.abs(boundary[..., None]))
        swap = (top_got != top_ref) & near
        first_ties = int(swap.sum())
        ref = np.where(swap, got, ref)
    rel = np.abs(got - ref) / np.maximum(np.abs(ref), 1e-30)
    worst = float(rel.max())
    (press, *_), _ = parse_name(name)
    if worst > SCORE_RTOL:
        l, g, p = np.unravel_index(int(rel.argmax()), rel.shape)
        failures.append(f"{name} {mode}: score[{l}][{g}][{p}] {got[l, g, p]!r} vs {ref[l, g, p]!r}"
                        f" (rel {worst:.2e})")
    # The boundary is the lowest kept score of the candidates that compete:
    # H2O's recent window is kept whatever its score.
    competing, recent = ref.copy(), 0
    if parse_name(name)[0][6] == "h2o":
        keep, tokens = ratio(budget)
        recent = (keep if tokens else int(n * keep)) // 2
        if recent:
            competing[..., n - recent:] = np.inf
    with h5py.File(keep_path, "r") as f:
        mask = f["keep"][()][:, :, :n].astype(bool)
        recorded = int(f.attrs["recent"])
    if recorded != recent:
        failures.append(f"{name} {mode} {budget}: the keep file records recent {recorded}, "
                        f"expected {recent}")
    want = kvpress_keep(ref, name, n, budget)
    differ = np.argwhere(mask != want)
    ties = 0
    for l, g, p in differ:
        kept = np.sort(competing[l, g][want[l, g]])
        boundary = kept[0] if len(kept) else np.inf
        if abs(competing[l, g, p] - boundary) <= TIE_RTOL * max(abs(boundary), 1e-30):
            ties += 1
        else:
            failures.append(f"{name} {mode} {budget}: keep[{l}][{g}][{p}] = {int(mask[l, g, p])}, "
                            f"kvpress {int(want[l, g, p])} (score {ref[l, g, p]!r}, boundary "
                            f"{boundary!r})")
            break
    agreement = (mask & want).sum() / want.sum()
    first = f", {first_ties} first-stage ties" if first_ties else ""
    status = "FAIL" if failures else "ok"
    print(f"{status:5} {name:26} {mode:8} {budget:4} max rel {worst:.1e}, "
          f"{len(differ)} kept positions differ ({ties} at ties{first}), agreement {agreement:.4f}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace")
    parser.add_argument("--score")
    parser.add_argument("--budget", default="10%")
    parser.add_argument("--mode", default="agnostic")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="presets_reference.", dir=TMP)
    try:
        if args.trace:
            trace = Trace(args.trace)
            return 1 if compare(trace, args.trace, args.score, args.budget, args.mode, work) else 0
        if not os.path.exists(MODEL):
            print(f"SKIP: no model at {MODEL}")
            return 0
        path = os.path.join(work, "t512.h5")
        run([OBCACHE, "capture", "--length", "512", "--depth", "50", "--haystack", "kjv",
             "--seed", "3", "--rows", "128", "--decode", "2", "--model", MODEL, "-o", path])
        trace = Trace(path)
        failures = []
        for mode in ("aware", "agnostic"):
            for name in list(PRESETS) + PAIRED:
                for budget in ("40%", "0.1"):
                    failures += compare(trace, path, name, budget, mode, work)
        for line in failures:
            print("FAIL ", line)
        print("presets reference:", "FAIL" if failures else "ok")
        return 1 if failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
