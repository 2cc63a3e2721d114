# A lane-level NumPy model of the two attention kernels of
# runtime/cuda/cuda_attention.cu (tiles, warps, per-lane keys, online softmax,
# masks), checked against a direct float64 attention. It checks the kernels'
# index and softmax logic on a machine without a GPU; it does not run them.
# Usage: python3 tests/gpu/attention_model.py (prints the max differences).
import numpy as np
BQ, BK, WARPS = 16, 32, 4
RPW = BQ // WARPS
def flash(q, k, v, n_heads, n_kv, HD, stride, pos0, n, ev):
    q_dim = n_heads * HD; group = n_heads // n_kv
    out = np.zeros((n, q_dim), np.float32); lse = np.zeros((n_heads, n), np.float32)
    scale = np.float32(1 / np.sqrt(HD))
    for bx in range((n + BQ - 1) // BQ):
        for h in range(n_heads):
            t0 = bx * BQ; nq = min(BQ, n - t0)
            kh = k[(h // group) * stride * HD:]; vh = v[(h // group) * stride * HD:]
            dropped = ev[h // group]
            key_end = pos0 + t0 + nq
            sq = np.zeros((BQ, HD), np.float32)
            for r in range(nq): sq[r] = q[t0 + r, h * HD:(h + 1) * HD] * scale
            for warp in range(WARPS):
                m = np.full(RPW, -np.inf, np.float32); l = np.zeros(RPW, np.float32)
                acc = np.zeros((RPW, HD), np.float32)
                for k0 in range(0, key_end, BK):
                    sk = np.zeros((BK, HD), np.float32); sv = np.zeros((BK, HD), np.float32)
                    for j in range(BK):
                        if k0 + j < key_end:
                            sk[j] = kh[(k0 + j) * HD:(k0 + j + 1) * HD]; sv[j] = vh[(k0 + j) * HD:(k0 + j + 1) * HD]
                    lanes = np.arange(32); key = k0 + lanes
                    for r in range(RPW):
                        row = warp * RPW + r
                        score = sk @ sq[row]
                        valid = (row < nq) & (key <= pos0 + t0 + row)
                        valid &= dropped[np.minimum(key, stride - 1)] == 0  # as !(dropped && dropped[key])
                        sc = np.where(valid, score, -np.inf)
                        m_new = max(m[r], sc.max())
                        if m_new == -np.inf: continue
                        p = np.where(valid, np.exp(sc - m_new), 0).astype(np.float32)
                        alpha = np.exp(m[r] - m_new)
                        l[r] = l[r] * alpha + p.sum(); m[r] = m_new
                        acc[r] = acc[r] * alpha + p @ sv
                for r in range(RPW):
                    row = warp * RPW + r
                    if row >= nq: continue
                    out[t0 + row, h * HD:(h + 1) * HD] = acc[r] / l[r]
                    lse[h, t0 + row] = m[r] + np.log(l[r])
    return out, lse
def rows(q, k, lse, row_t, n_heads, n_kv, HD, stride, pos0, n, ev):
    group = n_heads // n_kv; n_keys = pos0 + n; scale = 1 / np.sqrt(HD)
    attn = np.full((n_heads, len(row_t), n_keys), np.nan, np.float32)
    for r, t in enumerate(row_t):
        for h in range(n_heads):
            kh = k[(h // group) * stride * HD:]
            position = pos0 + t
            sq = q[t, h * HD:(h + 1) * HD] * scale
            attn[h, r, position + 1:] = 0
            for j in range(position + 1):
                if ev[h // group][j]: attn[h, r, j] = 0; continue
                attn[h, r, j] = np.exp(sq @ kh[j * HD:(j + 1) * HD] - lse[h, t])
    return attn
def reference(q, k, v, n_heads, n_kv, HD, stride, pos0, n, ev):
    group = n_heads // n_kv; out = np.zeros((n, n_heads * HD)); lse = np.zeros((n_heads, n)); P = {}
    K = k.reshape(n_kv, stride, HD); V = v.reshape(n_kv, stride, HD)
    for h in range(n_heads):
        for t in range(n):
            keys = pos0 + t + 1
            s = K[h // group, :keys] @ q[t, h * HD:(h + 1) * HD].astype(np.float64) / np.sqrt(HD)
            s = np.where(ev[h // group][:keys] == 1, -np.inf, s)
            mx = s.max(); e = np.exp(s - mx); lse[h, t] = mx + np.log(e.sum())
            out[t, h * HD:(h + 1) * HD] = (e / e.sum()) @ V[h // group, :keys]
            P[h, t] = e / e.sum()
    return out, lse, P
rng = np.random.default_rng(0)
for (HD, H, G, pos0, n, evict) in [(64, 6, 2, 0, 40, 0), (32, 4, 4, 37, 21, 0), (32, 3, 1, 5, 1, 0),
                                   (32, 4, 2, 50, 20, 1)]:
    stride = pos0 + n + 3
    ev = np.zeros((G, stride), np.uint8)
    for g in range(G):
        if evict: ev[g, g:pos0:3] = 1
    q = rng.uniform(-1.5, 1.5, (n, H * HD)).astype(np.float32)
    k = rng.uniform(-1.5, 1.5, G * stride * HD).astype(np.float32)
    v = rng.uniform(-1, 1, G * stride * HD).astype(np.float32)
    o, l = flash(q, k, v, H, G, HD, stride, pos0, n, ev)
    ro, rl, P = reference(q, k, v, H, G, HD, stride, pos0, n, ev)
    row_t = [0, n // 2, n - 1]
    a = rows(q, k, l, row_t, H, G, HD, stride, pos0, n, ev)
    ra = np.zeros_like(a)
    for r, t in enumerate(row_t):
        for h in range(H): ra[h, r, :pos0 + t + 1] = P[h, t]
    worst = max(np.abs(o - ro).max(), np.abs(l - rl).max(), np.nanmax(np.abs(a - ra)))
    assert worst < 1e-5 and not np.isnan(a).any(), "kernel model disagrees with the reference"
    print(f"HD={HD} H={H}:{G} pos0={pos0} n={n} evicted={evict}: out {np.abs(o-ro).max():.2e} lse {np.abs(l-rl).max():.2e} A {np.nanmax(np.abs(a-ra)):.2e} nan={np.isnan(a).any()}")
