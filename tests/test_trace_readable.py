"""A trace written by `obcache synth` is readable without any project code:
h5py sees the attributes, shapes, dtypes (float16 for --dtype f16) and spans
the schema promises, NumPy recomputes every head's O and lse from Q, K, V
within 1e-5 relative, the content hash recomputed from SCHEMA.md's definition
equals the recorded one (and `obcache verify`'s), and `h5dump -H` lists the
layout.

Environment: OBCACHE (the binary), OBC_TMP (scratch folder)."""
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

OBCACHE = os.environ.get("OBCACHE", "obcache")
TMP = os.environ.get("OBC_TMP", tempfile.gettempdir())
SHAPE = dict(layers=2, heads=4, kv_heads=2, head_dim=16, prompt=64, rows=16, decode=4)
failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def synth(path, *extra):
    args = [OBCACHE, "synth", "-o", path, "--seed", "5", "--vocab", "32", "--store-attn",
            "--layers", str(SHAPE["layers"]), "--heads", str(SHAPE["heads"]),
            "--kv-heads", str(SHAPE["kv_heads"]), "--head-dim", str(SHAPE["head_dim"]),
            "--length", str(SHAPE["prompt"]), "--rows", str(SHAPE["rows"]),
            "--decode", str(SHAPE["decode"]), *extra]
    subprocess.run(args, check=True)


def recompute(f, layer):
    """Exact causal attention in float64 for every head of one layer."""
    g = f[f"layers/{layer:03d}"]
    K, V, Q = (g[n][()].astype(np.float64) for n in ("K", "V", "Q"))
    positions = f["row_positions"][()]
    scale = float(f.attrs["attn_scale"])
    group = int(f.attrs["n_heads"]) // int(f.attrs["n_kv_heads"])
    O, lse, A = [], [], []
    for h in range(Q.shape[0]):
        z = Q[h] @ K[h // group].T * scale
        z[np.arange(z.shape[1])[None, :] > positions[:, None]] = -np.inf
        top = z.max(axis=1, keepdims=True)
        w = np.exp(z - top)
        total = w.sum(axis=1, keepdims=True)
        lse.append((top + np.log(total))[:, 0])
        A.append(w / total)
        O.append(A[-1] @ V[h // group])
    return np.array(O), np.array(lse), np.array(A)


def fnv1a(data, state=0xcbf29ce484222325):
    """64-bit FNV-1a (traces/SCHEMA.md, Content hash)."""
    for byte in bytes(data):
        state = ((state ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return state


def text(value):
    """A fixed-length string attribute (h5py returns bytes) as str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def content_hash(f):
    """The content hash exactly as traces/SCHEMA.md defines it."""
    a = f.attrs
    lines = ["obcache trace content 2"]
    lines.append("shape " + " ".join(str(int(a[k])) for k in (
        "n_layers", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "n_prompt", "n_decode",
        "n_rows")) + f" {text(a['dtype'])} {int(a['has_attn'])} {int(a['has_logits'])}")
    lines.append(f"row_positions {fnv1a(f['row_positions'][()].astype('<i8').tobytes()):016x}")
    if int(a["has_tokens"]):
        lines.append(f"tokens {fnv1a(f['tokens'][()].astype('<i4').tobytes()):016x}")
    for name in ("prompt_text", "generated_text"):
        if name in f:
            lines.append(f"{name} {fnv1a(f[name][()].tobytes()):016x}")
    for name in f["spans"].attrs["names"]:
        begin, end = f["spans/" + name.decode()][()]
        lines.append(f"span {name.decode()} {begin} {end}")
    if int(a["has_logits"]):
        lines.append(f"logits {fnv1a(f['logits'][()].astype('<f4').tobytes()):016x}")
    kinds = ["K", "V", "Q", "O", "lse"] + (["A"] if int(a["has_attn"]) else [])
    for layer in range(int(a["n_layers"])):
        for kind in kinds:
            ds = f[f"layers/{layer:03d}/{kind}"]
            for head in range(ds.shape[0]):
                stored = ds[head].astype(ds.dtype.newbyteorder("<")).tobytes()
                lines.append(f"layer {layer} {kind} {head} {fnv1a(stored):016x}")
    if int(a["schema_version"]) >= 3:  # the column sums, hashed whole
        for layer in range(int(a["n_layers"])):
            for name in ("col_attn", "col_obc_v", "col_obc_k", "col_obc_vk"):
                stored = f[f"layers/{layer:03d}/{name}"][()].astype("<f4").tobytes()
                lines.append(f"column_sums {layer} {name} {fnv1a(stored):016x}")
        counts = f["column_counts"][()].astype("<i8").tobytes()
        lines.append(f"column_counts {int(a['agnostic_rows'])} {fnv1a(counts):016x}")
    if int(a.get("has_query_stats", 0)):  # the query statistics, hashed whole as f64
        for layer in range(int(a["n_layers"])):
            s, o = (fnv1a(f[f"layers/{layer:03d}/{k}"][()].astype("<f8").tobytes())
                    for k in ("q_sum", "q_outer"))
            lines.append(f"query_stats {layer} {s:016x} {o:016x}")
        counts = fnv1a(f["query_counts"][()].astype("<i8").tobytes())
        freq = fnv1a(f["rope_inv_freq"][()].astype("<f8").tobytes())
        lines.append(f"query_counts {int(a['query_stats_first_row'])} {counts:016x} {freq:016x}")
    return f"{fnv1a(''.join(line + chr(10) for line in lines).encode()):016x}"


def check_trace(path, dtype):
    with h5py.File(path, "r") as f:
        a = f.attrs
        check(int(a["schema_version"]) == 2 and int(a["complete"]) == 1, "schema_version 2, complete 1")
        check(text(a["dtype"]) == dtype, f"dtype attribute {a['dtype']!r} == {dtype!r}")
        for key in ("tool_version", "producer", "created", "model_name", "architecture", "rope_scaling",
                    "content_hash"):
            check(isinstance(a[key], bytes) and a.get_id(key).get_type().is_variable_str() is False,
                  f"attribute {key} is a fixed-length string ({a[key]!r})")
        recorded = text(a["content_hash"])
        computed = content_hash(f)
        check(computed == recorded, f"content hash recomputed from SCHEMA.md {computed} == recorded {recorded}")
        verify = subprocess.run([OBCACHE, "verify", path], capture_output=True, text=True)
        check(verify.returncode == 0 and f"content hash {recorded}" in verify.stdout,
              "obcache verify reports the same content hash")
        for key in ("n_layers", "n_heads", "n_kv_heads", "head_dim"):
            want = SHAPE[key[2:] if key.startswith("n_") else key]
            check(int(a[key]) == want, f"{key} = {int(a[key])} (expected {want})")
        s, T, R = SHAPE["prompt"], SHAPE["decode"], SHAPE["rows"]
        P, rows = s + T, R + T
        check(int(a["n_prompt"]) == s and int(a["n_decode"]) == T and int(a["n_positions"]) == P,
              "n_prompt, n_decode, n_positions")
        positions = f["row_positions"][()]
        check(positions.dtype == np.int64 and list(positions) == list(range(s - R, s + T)),
              "row_positions = last R prompt rows then every decode row")
        check(f["tokens"].dtype == np.int32 and f["tokens"].shape == (P,), "tokens int32 (n_positions)")
        check(f["logits"].shape == (T, 32), "logits (n_decode, vocab)")
        needle = f["spans/needle"][()]
        question = f["spans/question"][()]
        check([n.decode() for n in f["spans"].attrs["names"]] == ["needle", "question"],
              "spans needle and question, in that order in /spans names")
        check(needle.dtype == np.int64 and needle[1] - needle[0] == 16 and 0 < needle[0] < s,
              f"needle span {list(needle)} has 16 tokens inside the prompt")
        check(question[1] == s and needle[1] <= question[0], f"question span {list(question)} ends the prompt")
        check(abs(float(a["attn_scale"]) - SHAPE["head_dim"] ** -0.5) < 1e-12, "attn_scale = 1/sqrt(d)")
        float_type = np.float16 if dtype == "f16" else np.float32
        worst_o = worst_lse = worst_a = 0.0
        for layer in range(SHAPE["layers"]):
            g = f[f"layers/{layer:03d}"]
            H, KV, d = SHAPE["heads"], SHAPE["kv_heads"], SHAPE["head_dim"]
            want = {"K": (KV, P, d), "V": (KV, P, d), "Q": (H, rows, d), "O": (H, rows, d),
                    "lse": (H, rows), "A": (H, rows, P)}
            for name, shape in want.items():
                ds = g[name]
                expected_type = np.float32 if name == "lse" else float_type
                check(ds.shape == shape and ds.dtype == expected_type,
                      f"layers/{layer:03d}/{name} {ds.shape} {ds.dtype}")
            O, lse, A = recompute(f, layer)
            stored_o = g["O"][()].astype(np.float64)
            worst_o = max(worst_o, float(np.max(np.linalg.norm(O - stored_o, axis=2) / np.linalg.norm(O, axis=2))))
            worst_lse = max(worst_lse, float(np.max(np.abs(lse - g["lse"][()]) / np.maximum(1, np.abs(lse)))))
            worst_a = max(worst_a, float(np.max(np.abs(A - g["A"][()]))))
        # f32: stored O is the exact result rounded to float (~6e-8). f16: the
        # inputs were rounded to half before the exact computation, so only
        # O's own rounding (2^-11 ~ 5e-4) remains.
        limit = 1e-5 if dtype == "f32" else 2e-3
        print(f"{path}: max relative difference O {worst_o:.3g}, lse {worst_lse:.3g}, A {worst_a:.3g} (limit {limit})")
        check(worst_o <= limit and worst_lse <= 1e-5 and worst_a <= limit, "O, lse and A recomputed with NumPy")


def main():
    os.makedirs(TMP, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="trace_readable.", dir=TMP)
    f32 = os.path.join(folder, "synth-f32.h5")
    f16 = os.path.join(folder, "synth-f16.h5")
    synth(f32)
    synth(f16, "--dtype", "f16", "--compress", "4")
    check_trace(f32, "f32")
    check_trace(f16, "f16")
    dump = subprocess.run(["h5dump", "-H", f32], capture_output=True, text=True)
    check(dump.returncode == 0, "h5dump -H exits 0")
    check('DATASET "K"' in dump.stdout and 'GROUP "000"' in dump.stdout, "h5dump lists /layers/000/K")
    dump = subprocess.run(["h5dump", "-d", "/layers/000/K", "-H", f16], capture_output=True, text=True)
    check(dump.returncode == 0 and "/layers/000/K" in dump.stdout, "h5dump -d /layers/000/K on the f16 trace")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    shutil.rmtree(folder)
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
