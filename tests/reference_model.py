"""Independent NumPy forward pass of a Llama-family model (llama / qwen2 /
qwen3), the
reference the C runtime is tested against. Written from the architecture, not
from the C code: weights come from a GGUF file (read and dequantised with the
`gguf` PyPI package) or a Hugging Face folder (config.json + safetensors).

Choice of RoPE layout: everything runs in the Hugging Face layout (rotate the
halves (i, i + d/2) of each head). llama-arch GGUF files hold Q/K rows permuted
by llama.cpp's converter (so that interleaved pairs can be rotated); this
module undoes that permutation itself. qwen2- and qwen3-arch GGUF files are not
permuted (llama.cpp rotates them NEOX-style, on halves). Qwen3 (transformers'
modeling_qwen3.py) normalises every query and key head with RMSNorm (weights of
head_dim, shared by the heads) after the projections and before RoPE, has no
q/k/v biases, and states head_dim, which need not be hidden_size / n_heads.
The computation is done in float64, so the reference is not limited by fp32;
the embedding and the LM head are dequantised a block of rows at a time, so
that a model of Qwen3-8B's vocabulary fits in memory.

Usage as a script: reference_model.py MODEL --ids 1,2,3 -o logits.f32
(writes the float32 logits of every position, shape (n, vocab))."""
import argparse
import json
import math
import os
import sys

import numpy as np


class Weights:
    """Config (a dict of plain numbers) and float64 tensors in HF naming; the
    embedding and the LM head are Rows (row blocks dequantised on demand)."""

    def __init__(self, config, tensors):
        self.config = config
        self.tensors = tensors


class Rows:
    """A (rows, cols) matrix read a block of rows at a time as float64:
    block(r0, r1) returns rows [r0, r1)."""

    BLOCK = 8192

    def __init__(self, n_rows, n_cols, block):
        self.n_rows = n_rows
        self.shape = (n_rows, n_cols)
        self.block = block

    @staticmethod
    def of(array):
        return Rows(array.shape[0], array.shape[1], lambda r0, r1: array[r0:r1])

    def take(self, ids):
        return np.stack([self.block(i, i + 1)[0] for i in ids])

    def times_transposed(self, x):
        """x @ matrix.T, one block of rows (output columns) at a time."""
        out = np.empty((x.shape[0], self.n_rows))
        for r0 in range(0, self.n_rows, self.BLOCK):
            r1 = min(r0 + self.BLOCK, self.n_rows)
            out[:, r0:r1] = x @ self.block(r0, r1).T
        return out


def _field(reader, key, default=None):
    field = reader.fields.get(key)
    if field is None:
        return default
    value = field.contents()
    return value


def _unpermute_rows(w, n_head):
    """Inverse of llama.cpp's convert permute(): rows of each head go from
    interleaved pairs (2i, 2i+1) back to halves (i, i + d/2)."""
    rows = w.shape[0]
    head_dim = rows // n_head
    rest = w.shape[1:]
    return w.reshape(n_head, head_dim // 2, 2, *rest).swapaxes(1, 2).reshape(rows, *rest)


def load_gguf(path):
    import gguf

    reader = gguf.GGUFReader(path)
    arch = _field(reader, "general.architecture")
    if arch not in ("llama", "qwen2", "qwen3"):
        raise ValueError(f"{path}: architecture {arch} not supported by the reference")

    def meta(key, default=None):
        return _field(reader, f"{arch}.{key}", default)

    n_heads = int(meta("attention.head_count"))
    n_kv = int(meta("attention.head_count_kv", n_heads))
    dim = int(meta("embedding_length"))
    config = {
        "arch": arch,
        "n_layers": int(meta("block_count")),
        "dim": dim,
        "n_heads": n_heads,
        "n_kv_heads": n_kv,
        "head_dim": int(meta("attention.key_length", dim // n_heads)),
        "eps": float(meta("attention.layer_norm_rms_epsilon")),
        "theta": float(meta("rope.freq_base", 10000.0)),
        # linear rope scaling (positions / factor); Llama-3 scaling comes as rope_freqs.weight
        "rope_linear": float(meta("rope.scaling.factor", 1.0))
        if meta("rope.scaling.type") == "linear" else 1.0,
    }
    def rows(t):
        cols = int(t.shape[0])  # GGUF lists the fastest dimension first
        return Rows(int(t.shape[1]), cols, lambda r0, r1: np.asarray(
            gguf.quants.dequantize(t.data[r0:r1], t.tensor_type), dtype=np.float64)
            .reshape(r1 - r0, cols))

    raw, big = {}, {}
    for t in reader.tensors:
        if t.name in ("token_embd.weight", "output.weight"):
            big[t.name] = rows(t)
            continue
        data = gguf.quants.dequantize(t.data, t.tensor_type)
        shape = [int(x) for x in reversed(t.shape)]
        raw[t.name] = np.asarray(data, dtype=np.float64).reshape(shape)

    tensors = {"embed": big["token_embd.weight"], "norm": raw["output_norm.weight"]}
    tensors["lm_head"] = big.get("output.weight", big["token_embd.weight"])
    if "rope_freqs.weight" in raw:
        tensors["rope_freq_factors"] = raw["rope_freqs.weight"]
    names = {
        "attn_norm": "attn_norm.weight", "q": "attn_q.weight", "k": "attn_k.weight",
        "v": "attn_v.weight", "o": "attn_output.weight", "ffn_norm": "ffn_norm.weight",
        "gate": "ffn_gate.weight", "up": "ffn_up.weight", "down": "ffn_down.weight",
        "bq": "attn_q.bias", "bk": "attn_k.bias", "bv": "attn_v.bias",
        "q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight",
    }
    for layer in range(config["n_layers"]):
        for short, suffix in names.items():
            name = f"blk.{layer}.{suffix}"
            if name in raw:
                tensors[f"{layer}.{short}"] = raw[name]
        if arch == "llama":  # undo the converter's Q/K row permutation
            tensors[f"{layer}.q"] = _unpermute_rows(tensors[f"{layer}.q"], n_heads)
            tensors[f"{layer}.k"] = _unpermute_rows(tensors[f"{layer}.k"], n_kv)
            for b, heads in (("bq", n_heads), ("bk", n_kv)):
                if f"{layer}.{b}" in tensors:
                    tensors[f"{layer}.{b}"] = _unpermute_rows(tensors[f"{layer}.{b}"], heads)
    return Weights(config, tensors)


def _llama3_factors(inv_freq, scaling):
    """Per-frequency divisors of Llama-3.1 rope scaling (as HF defines them)."""
    factor = float(scaling["factor"])
    low = float(scaling.get("low_freq_factor", 1.0))
    high = float(scaling.get("high_freq_factor", 4.0))
    old_ctx = float(scaling["original_max_position_embeddings"])
    out = np.empty_like(inv_freq)
    for i, freq in enumerate(inv_freq):
        wavelen = 2 * math.pi / freq
        if wavelen < old_ctx / high:
            new = freq
        elif wavelen > old_ctx / low:
            new = freq / factor
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            new = (1 - smooth) * freq / factor + smooth * freq
        out[i] = freq / new
    return out


def read_safetensors(path):
    """All tensors of a .safetensors file as float64 (F32, F16 or BF16): an
    8-byte little-endian header size, a JSON header, then the raw data.
    (safetensors.numpy cannot represent BF16, hence this reader.)"""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[begin:end]
        if info["dtype"] == "F32":
            values = np.frombuffer(raw, dtype="<f4")
        elif info["dtype"] == "F16":
            values = np.frombuffer(raw, dtype="<f2")
        elif info["dtype"] == "BF16":
            values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: {name} has dtype {info['dtype']} (expected F32/F16/BF16)")
        out[name] = values.astype(np.float64).reshape(info["shape"])
    return out


def load_hf(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    arch = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
            "Qwen3ForCausalLM": "qwen3"}[cfg["architectures"][0]]
    n_heads = cfg["num_attention_heads"]
    config = {
        "arch": arch,
        "n_layers": cfg["num_hidden_layers"],
        "dim": cfg["hidden_size"],
        "n_heads": n_heads,
        "n_kv_heads": cfg.get("num_key_value_heads", n_heads),
        # Qwen3Config's default head_dim is 128; the others derive it
        "head_dim": cfg.get("head_dim") or (128 if arch == "qwen3" else cfg["hidden_size"] // n_heads),
        "eps": cfg["rms_norm_eps"],
        # transformers 5 saves rope_theta and the scaling in rope_parameters
        "theta": cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0),
        "rope_linear": 1.0,
    }
    raw = {}
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    for name in files:
        raw.update(read_safetensors(os.path.join(folder, name)))
    tensors = {"embed": Rows.of(raw["model.embed_tokens.weight"]), "norm": raw["model.norm.weight"]}
    tensors["lm_head"] = Rows.of(raw["lm_head.weight"]) if "lm_head.weight" in raw else tensors["embed"]
    names = {
        "attn_norm": "input_layernorm.weight", "q": "self_attn.q_proj.weight",
        "k": "self_attn.k_proj.weight", "v": "self_attn.v_proj.weight",
        "o": "self_attn.o_proj.weight", "ffn_norm": "post_attention_layernorm.weight",
        "gate": "mlp.gate_proj.weight", "up": "mlp.up_proj.weight",
        "down": "mlp.down_proj.weight", "bq": "self_attn.q_proj.bias",
        "bk": "self_attn.k_proj.bias", "bv": "self_attn.v_proj.bias",
        "q_norm": "self_attn.q_norm.weight", "k_norm": "self_attn.k_norm.weight",
    }
    for layer in range(config["n_layers"]):
        for short, suffix in names.items():
            name = f"model.layers.{layer}.{suffix}"
            if name in raw:
                tensors[f"{layer}.{short}"] = raw[name]
    scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if scaling and scaling.get("rope_type", scaling.get("type")) == "linear":
        config["rope_linear"] = float(scaling["factor"])
    if scaling and scaling.get("rope_type", scaling.get("type")) == "llama3":
        hd = config["head_dim"]
        inv = config["theta"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        tensors["rope_freq_factors"] = _llama3_factors(inv, scaling)
    return Weights(config, tensors)


def load(path):
    return load_hf(path) if os.path.isdir(path) else load_gguf(path)


def _rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _rope_halves(x, positions, inv_freq):
    """x: (heads, n, d) rotated by angle position * inv_freq over halves."""
    half = x.shape[-1] // 2
    angle = positions[:, None] * inv_freq[None, :]  # (n, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def forward(weights, ids, allowed=None, record=None):
    """Logits (n, vocab) of every position of ids, starting at position 0.
    allowed: None (causal attention), or bool (n_layers, n_kv_heads, n, n),
    allowed[l, g, i, j] = query i of KV head g's group may attend to key j in
    layer l (e.g. a compressed context under a query after it).
    record: None, or a list that gets per layer the (q, k) attention scores
    are computed from: q (n_heads, n, head_dim), k (n_kv_heads, n, head_dim),
    after the Q/K norms and RoPE."""
    c, t = weights.config, weights.tensors
    n = len(ids)
    hd, nh, nkv = c["head_dim"], c["n_heads"], c["n_kv_heads"]
    inv_freq = c["theta"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    if "rope_freq_factors" in t:
        inv_freq = inv_freq / t["rope_freq_factors"]
    inv_freq = inv_freq / c.get("rope_linear", 1.0)  # transformers: position / factor
    positions = np.arange(n, dtype=np.float64)
    causal = np.triu(np.full((n, n), -np.inf), k=1)
    x = t["embed"].take(ids)
    for layer in range(c["n_layers"]):
        p = f"{layer}."
        h = _rms_norm(x, t[p + "attn_norm"], c["eps"])
        q, k, v = h @ t[p + "q"].T, h @ t[p + "k"].T, h @ t[p + "v"].T
        if p + "bq" in t:
            q, k, v = q + t[p + "bq"], k + t[p + "bk"], v + t[p + "bv"]
        q, k = q.reshape(n, nh, hd), k.reshape(n, nkv, hd)
        if p + "q_norm" in t:  # Qwen3: RMSNorm of each head, before RoPE
            q = _rms_norm(q, t[p + "q_norm"], c["eps"])
            k = _rms_norm(k, t[p + "k_norm"], c["eps"])
        q = _rope_halves(q.transpose(1, 0, 2), positions, inv_freq)
        k = _rope_halves(k.transpose(1, 0, 2), positions, inv_freq)
        if record is not None:
            record.append((q, k))
        v = v.reshape(n, nkv, hd).transpose(1, 0, 2)
        k = np.repeat(k, nh // nkv, axis=0)  # query head j uses KV head j // group
        v = np.repeat(v, nh // nkv, axis=0)
        if allowed is None:
            mask = causal
        else:  # query head j uses KV head j // group
            mask = np.where(np.repeat(allowed[layer], nh // nkv, axis=0), 0.0, -np.inf)
        z = q @ k.transpose(0, 2, 1) / math.sqrt(hd) + mask
        z = z - z.max(axis=-1, keepdims=True)
        a = np.exp(z)
        a /= a.sum(axis=-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(n, nh * hd)
        x = x + o @ t[p + "o"].T
        h = _rms_norm(x, t[p + "ffn_norm"], c["eps"])
        g = h @ t[p + "gate"].T
        x = x + (g / (1.0 + np.exp(-g)) * (h @ t[p + "up"].T)) @ t[p + "down"].T
    return t["lm_head"].times_transposed(_rms_norm(x, t["norm"], c["eps"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--ids", required=True, help="comma-separated token ids")
    parser.add_argument("-o", "--output", required=True, help="float32 logits (n, vocab)")
    args = parser.parse_args()
    ids = [int(s) for s in args.ids.split(",")]
    logits = forward(load(args.model), ids)
    logits.astype("<f4").tofile(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
