#!/usr/bin/env python3
"""Convert a llama/qwen2/qwen3 GGUF file into a Hugging Face folder (a test tool).

Writes config.json, the weights as model.safetensors (or N shards plus
model.safetensors.index.json) in F32, F16 or BF16, and optionally
tokenizer.json + tokenizer_config.json (built from the GGUF metadata by
transformers' GGUF tokenizer converter). The
weights are dequantised with the `gguf` package, and llama.cpp's permutation of
the Q/K rows of llama-arch models is undone, so the folder holds the layout
transformers would load: RoPE on halves (i, i + head_dim/2) instead of
interleaved pairs.

usage: gguf_to_hf.py MODEL.gguf OUT_DIR [--dtype f32|f16|bf16] [--shards N] [--tokenizer]
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def field_value(reader, key, default=None):
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def unpermute(w, n_head):
    """Inverse of llama.cpp's convert_hf_to_gguf permute(): GGUF row
    h*hd + 2i + j holds Hugging Face row h*hd + j*hd/2 + i."""
    rows = w.shape[0]
    head_dim = rows // n_head
    return w.reshape(n_head, head_dim // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(name):
    """GGUF tensor name -> Hugging Face name (None for tensors HF does not store)."""
    fixed = {"token_embd.weight": "model.embed_tokens.weight",
             "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    if name in fixed:
        return fixed[name]
    parts = name.split(".")
    if parts[0] != "blk":
        return None
    layer, what, kind = parts[1], parts[2], parts[3]
    table = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
             "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
             "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}
    return f"model.layers.{layer}.{table[what]}.{kind}"


def to_bytes(array, dtype):
    """(safetensors dtype name, raw little-endian bytes) of an fp32 array."""
    if dtype == "f32":
        return "F32", np.ascontiguousarray(array, dtype="<f4").tobytes()
    if dtype == "f16":
        return "F16", np.ascontiguousarray(array.astype("<f2")).tobytes()
    # bf16: round to nearest even on the fp32 bit pattern (numpy has no bf16 type)
    bits = np.ascontiguousarray(array, dtype="<f4").view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return "BF16", rounded.astype("<u2").tobytes()


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype name, shape, bytes). The format is an
    8-byte little-endian header length, a JSON header, then the data."""
    header, offset = {}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path + ".part", "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for _, _, _, data in tensors:
            out.write(data)
    os.replace(path + ".part", path)


def config_from_gguf(reader, tensors):
    arch = field_value(reader, "general.architecture")
    classes = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
    if arch not in classes:
        sys.exit(f"gguf_to_hf: architecture {arch!r} not supported")
    if "rope_freqs.weight" in tensors:
        sys.exit("gguf_to_hf: rope_freqs.weight (Llama-3 scaling) cannot be turned back into config.json")
    k = lambda name, default=None: field_value(reader, f"{arch}.{name}", default)
    dim, heads = int(k("embedding_length")), int(k("attention.head_count"))
    return {
        "architectures": [classes[arch]],
        "model_type": arch,
        "hidden_size": dim,
        "intermediate_size": int(k("feed_forward_length")),
        "num_hidden_layers": int(k("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(k("attention.head_count_kv", heads)),
        "head_dim": int(k("attention.key_length", dim // heads)),
        "rms_norm_eps": float(k("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(k("rope.freq_base", 10000.0)),
        "max_position_embeddings": int(k("context_length")),
        "vocab_size": int(tensors["token_embd.weight"].shape[0]),
        "tie_word_embeddings": "output.weight" not in tensors,
        "hidden_act": "silu",
        "rope_scaling": None,
        "torch_dtype": "float32",
    }


def write_tokenizer(reader, out_dir):
    """tokenizer.json + tokenizer_config.json from the GGUF's tokenizer.ggml.*
    metadata, built by transformers' GGUF tokenizer converter (which needs no
    PyTorch; its GGUF file reader does, hence the metadata comes from `gguf`).
    transformers knows no "smollm" pre-tokenizer; SmolLM2's own tokenizer.json
    splits digits one by one before the byte-level regex, so that is restored."""
    try:  # transformers 5
        from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer
    except ImportError:  # transformers 4
        from transformers.integrations.ggml import convert_gguf_tokenizer
    from tokenizers import pre_tokenizers

    value = lambda key, default=None: field_value(reader, key, default)
    meta = {"tokenizer_type": value("tokenizer.ggml.model"), "pre_tokenizer_type": value("tokenizer.ggml.pre"),
            "tokens": value("tokenizer.ggml.tokens"), "token_type": value("tokenizer.ggml.token_type"),
            "merges": value("tokenizer.ggml.merges"), "bos_token_id": value("tokenizer.ggml.bos_token_id"),
            "eos_token_id": value("tokenizer.ggml.eos_token_id")}
    if meta["tokens"] is None:
        sys.exit("gguf_to_hf: the GGUF has no tokenizer.ggml.tokens; drop --tokenizer")
    backend, _ = convert_gguf_tokenizer(value("general.architecture"), meta)
    if meta["pre_tokenizer_type"] == "smollm":
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    backend.save(os.path.join(out_dir, "tokenizer.json"))
    tokens = meta["tokens"]
    config = {"add_bos_token": bool(value("tokenizer.ggml.add_bos_token", False))}
    if meta["bos_token_id"] is not None:
        config["bos_token"] = tokens[meta["bos_token_id"]]
    if meta["eos_token_id"] is not None:
        config["eos_token"] = tokens[meta["eos_token_id"]]
    template = value("tokenizer.chat_template")
    if template:
        config["chat_template"] = template
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--tokenizer", action="store_true", help="also write tokenizer.json (needs transformers)")
    args = ap.parse_args()

    reader = GGUFReader(args.gguf)
    tensors = {}
    for t in reader.tensors:
        # dequantize returns the row-major (slowest first) array, e.g. (out, in)
        tensors[t.name] = dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)])
    config = config_from_gguf(reader, tensors)
    permuted = config["model_type"] == "llama"

    out = []
    for name, w in tensors.items():
        hf = hf_name(name)
        if hf is None:
            continue
        if permuted and name.endswith("attn_q.weight"):
            w = unpermute(w, config["num_attention_heads"])
        elif permuted and name.endswith("attn_k.weight"):
            w = unpermute(w, config["num_key_value_heads"])
        dtype, data = to_bytes(w.astype(np.float32), args.dtype)
        out.append((hf, dtype, w.shape, data))
    out.sort(key=lambda item: item[0])

    tmp = f"{args.out}.part{os.getpid()}"  # concurrent conversions must not collide
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    config["torch_dtype"] = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[args.dtype]
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if args.shards <= 1:
        if args.dtype == "f32":  # the reference writer, where numpy has the dtype
            from safetensors.numpy import save_file
            save_file({n: np.frombuffer(d, "<f4").reshape(s) for n, _, s, d in out},
                      os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        else:
            write_safetensors(os.path.join(tmp, "model.safetensors"), out)
    else:
        weight_map = {}
        for i in range(args.shards):
            part = out[i::args.shards]
            file = f"model-{i + 1:05d}-of-{args.shards:05d}.safetensors"
            write_safetensors(os.path.join(tmp, file), part)
            weight_map.update({name: file for name, _, _, _ in part})
        index = {"metadata": {"total_size": sum(len(d) for _, _, _, d in out)}, "weight_map": weight_map}
        with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
    if args.tokenizer:
        write_tokenizer(reader, tmp)
    shutil.rmtree(args.out, ignore_errors=True)
    try:
        os.replace(tmp, args.out)
    except OSError:  # another process finished the same conversion first
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"gguf_to_hf: {len(out)} tensors ({args.dtype}, {max(args.shards, 1)} file(s)) -> {args.out}")


if __name__ == "__main__":
    main()
