#!/usr/bin/env python3
"""A random-weight llama or qwen3 GGUF of a real model's shape, for the memory
and agreement tests of stored-type weights (tests/test_weights_memory.sh), the
8B benchmark (bench/run_weights.sh), the GPU kit's small model (kit) and the
Qwen3 tests (tests/test_qwen3.sh, tests/test_model_reference.py).

Shapes: llama-1b = Llama-3.2-1B (16 layers, dim 2048, ffn 8192, 32/8 heads of
64, vocab 128256, tied embeddings); llama-8b = Llama-3.1-8B (32 layers, dim
4096, ffn 14336, 32/8 heads of 128, vocab 128256, untied); qwen3-8b-1layer =
one layer of Qwen3-8B (dim 4096, ffn 12288, 32/8 heads of 128, vocab 151936,
untied, rope theta 1e6); qwen3-small = a Qwen3 whose head_dim (64) is not
dim / heads (128 / 4), tied. qwen3 shapes carry the per-head Q/K norms
(attn_q_norm / attn_k_norm, head_dim F32 weights drawn from [1, 3], so that a
swap of the two or a norm over the wrong axis shows); mistral-small = Mistral's
layout (8/2 heads, untied) at dim 128 with vocab 1024, for a SentencePiece
vocabulary (tests/test_sentencepiece_model.sh).

Every matrix is written in TYPE (Q4_K or Q8_0) as random blocks: random quant
bytes (every code occurs) with f16 scales drawn so that weights have about the
magnitude of a trained model's (|w| ~ 0.02). The `gguf` package cannot
quantise Q4_K, and quantising 1.2 G normal values in NumPy would take minutes;
random blocks are valid weights of the stored type, which is all these tests
need. Norms are F32 ones. The tokenizer is SOURCE's tokenizer.* metadata
(SmolLM2's, 49152 tokens, for most shapes) padded with reserved control tokens
to the shape's rows, so that every id the random model can emit decodes.

usage: make_random_gguf.py SHAPE TYPE SOURCE.gguf OUT.gguf
"""
import sys

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T, GGUFReader, GGUFValueType, GGUFWriter

SHAPES = {
    "llama-1b": dict(layers=16, dim=2048, ffn=8192, heads=32, kv=8, head_dim=64, vocab=128256,
                     tied=True),
    "llama-8b": dict(layers=32, dim=4096, ffn=14336, heads=32, kv=8, head_dim=128, vocab=128256,
                     tied=False),
    # The GPU kit's model (scripts/gpu-kit.sh): small enough to travel (7 MB in
    # Q8_0), weights 8x larger so that attention is far from uniform and a
    # GPU-vs-CPU comparison of rankings is not decided by near-ties.
    "kit": dict(layers=2, dim=128, ffn=256, heads=4, kv=2, head_dim=32, vocab=49152, tied=True,
                scale=8.0),
    "qwen3-small": dict(arch="qwen3", layers=2, dim=128, ffn=256, heads=4, kv=2, head_dim=64,
                        vocab=49152, tied=True, scale=8.0),
    # Mistral's layout (llama architecture, 4:1 grouped-query attention,
    # untied output) at a toy size, for a SentencePiece vocabulary
    # (tests/make_sentencepiece_vocab.py) padded to 1024 rows.
    "mistral-small": dict(layers=2, dim=128, ffn=256, heads=8, kv=2, head_dim=16, vocab=1024,
                          tied=False, scale=8.0),
    "qwen3-8b-1layer": dict(arch="qwen3", layers=1, dim=4096, ffn=12288, heads=32, kv=8,
                            head_dim=128, vocab=151936, tied=False),
}
# Byte offsets of the f16 scales in a block (formats/dequant.c) and the scale
# that gives |w| ~ 0.02: Q8_0 w = d q, q in [-128, 127]; Q4_K w = d sc q - dmin m
# with 6-bit sc, m and q in [0, 15].
SCALES = {T.Q8_0: [(0, 2.5e-4)], T.Q4_K: [(0, 1.0e-4), (2, 1.0e-4)]}


def random_matrix(rng, qtype, rows, cols, gain=1.0):
    block, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = rows * cols // block
    data = np.frombuffer(rng.bytes(n_blocks * block_bytes), dtype=np.uint8).copy()
    blocks = data.reshape(n_blocks, block_bytes)
    for offset, scale in SCALES[qtype]:
        d = (gain * scale * (1.0 + rng.random(n_blocks, dtype=np.float32))).astype("<f2")
        blocks[:, offset:offset + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    return data.reshape(rows, cols // block * block_bytes)


def copy_tokenizer(source, writer, vocab):
    reader = GGUFReader(source)
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == GGUFValueType.STRING:
                values = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
            elif sub == GGUFValueType.FLOAT32:
                values = [float(field.parts[i][0]) for i in field.data]
            else:
                values = [int(field.parts[i][0]) for i in field.data]
            if key == "tokenizer.ggml.tokens":
                values += [f"<|reserved_special_token_{i}|>" for i in range(vocab - len(values))]
            elif key == "tokenizer.ggml.token_type":
                values += [3] * (vocab - len(values))  # CONTROL
            elif key == "tokenizer.ggml.scores":
                values += [0.0] * (vocab - len(values))
            writer.add_array(key, values)
        elif kind == GGUFValueType.STRING:
            writer.add_string(key, bytes(field.parts[field.data[0]]).decode("utf-8"))
        elif kind == GGUFValueType.BOOL:
            writer.add_bool(key, bool(field.parts[field.data[0]][0]))
        else:
            writer.add_uint32(key, int(field.parts[field.data[0]][0]))


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in SHAPES or sys.argv[2] not in ("Q4_K", "Q8_0"):
        sys.exit(__doc__)
    s = SHAPES[sys.argv[1]]
    qtype = T[sys.argv[2]]
    rng = np.random.default_rng(1)
    arch = s.get("arch", "llama")
    qwen3 = arch == "qwen3"
    writer = GGUFWriter(sys.argv[4], arch)
    writer.add_name(f"random {sys.argv[1]} {sys.argv[2]}")
    writer.add_block_count(s["layers"])
    writer.add_context_length(40960 if qwen3 else 131072)
    writer.add_embedding_length(s["dim"])
    writer.add_feed_forward_length(s["ffn"])
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["kv"])
    writer.add_key_length(s["head_dim"])
    writer.add_value_length(s["head_dim"])
    writer.add_rope_dimension_count(s["head_dim"])
    writer.add_rope_freq_base(1e6 if qwen3 else 500000.0)
    writer.add_layer_norm_rms_eps(1e-6 if qwen3 else 1e-5)
    writer.add_vocab_size(s["vocab"])
    copy_tokenizer(sys.argv[3], writer, s["vocab"])

    dim, q_dim, kv_dim, ffn = s["dim"], s["heads"] * s["head_dim"], s["kv"] * s["head_dim"], s["ffn"]
    tensors = [("token_embd.weight", s["vocab"], dim), ("output_norm.weight", dim, 0)]
    if not s["tied"]:
        tensors.append(("output.weight", s["vocab"], dim))
    for layer in range(s["layers"]):
        tensors += [(f"blk.{layer}.{name}", rows, cols) for name, rows, cols in [
            ("attn_norm.weight", dim, 0), ("attn_q.weight", q_dim, dim),
            ("attn_k.weight", kv_dim, dim), ("attn_v.weight", kv_dim, dim),
            ("attn_output.weight", dim, q_dim), ("ffn_norm.weight", dim, 0),
            ("ffn_gate.weight", ffn, dim), ("ffn_up.weight", ffn, dim),
            ("ffn_down.weight", dim, ffn)]]
        if qwen3:
            tensors += [(f"blk.{layer}.attn_q_norm.weight", s["head_dim"], 0),
                        (f"blk.{layer}.attn_k_norm.weight", s["head_dim"], 0)]
    block, block_bytes = GGML_QUANT_SIZES[qtype]
    for name, rows, cols in tensors:
        if cols:
            writer.add_tensor_info(name, (rows, cols // block * block_bytes), np.dtype(np.uint8),
                                   rows * cols // block * block_bytes, raw_dtype=qtype)
        else:
            writer.add_tensor_info(name, (rows,), np.dtype(np.float32), rows * 4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for name, rows, cols in tensors:
        if cols:
            writer.write_tensor_data(random_matrix(rng, qtype, rows, cols, s.get("scale", 1.0)))
        elif "_norm.weight" in name and ("attn_q" in name or "attn_k" in name):
            writer.write_tensor_data((1.0 + 2.0 * rng.random(rows)).astype(np.float32))
        else:
            writer.write_tensor_data(np.ones(rows, dtype=np.float32))
    writer.close()


if __name__ == "__main__":
    main()
