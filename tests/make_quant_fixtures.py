#!/usr/bin/env python3
"""Dequantisation fixtures for tests/test_gguf.c, with the `gguf` package as
the reference.

For every ggml type the C reader supports, writes OUT/<TYPE>.raw (blocks as
stored in a GGUF file) and OUT/<TYPE>.f32 (what gguf.quants.dequantize makes
of them), and a manifest line "TYPE type_id n_elements". The blocks are random
bytes with finite f16 scales (every bit pattern of the quants occurs), followed,
where the package can quantise the type, by blocks quantised from random
normal values. With a GGUF model as second argument, also writes the
reference dequantisation of a few of its real tensors (REAL_<name>.f32).

usage: make_quant_fixtures.py OUT_DIR [MODEL.gguf]
"""
import os
import sys

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T, GGUFReader
from gguf.quants import dequantize, quantize

TYPES = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q4_K, T.Q5_K, T.Q6_K]
# Byte offsets of the f16 scales inside one block (random bytes there could be inf/NaN).
SCALE_OFFSETS = {T.Q8_0: [0], T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2],
                 T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}
N_RANDOM_BLOCKS = 64


def random_blocks(qtype, rng):
    block_size, block_bytes = GGML_QUANT_SIZES[qtype]
    if qtype in (T.F32, T.F16, T.BF16):
        n = N_RANDOM_BLOCKS * 32
        if qtype == T.F32:
            return rng.standard_normal(n).astype("<f4").view(np.uint8)
        bits = rng.integers(0, 1 << 16, n, dtype=np.uint32)
        exponent_all_ones = 0x7C00 if qtype == T.F16 else 0x7F80
        bits = np.where((bits & exponent_all_ones) == exponent_all_ones, bits & ~np.uint32(0x4000), bits)
        return bits.astype("<u2").view(np.uint8)  # every finite pattern, subnormals included
    blocks = rng.integers(0, 256, (N_RANDOM_BLOCKS, block_bytes), dtype=np.uint8)
    for offset in SCALE_OFFSETS[qtype]:
        scales = (rng.standard_normal(N_RANDOM_BLOCKS) * 0.05).astype("<f2").view(np.uint8).reshape(-1, 2)
        blocks[:, offset:offset + 2] = scales
    return blocks.reshape(-1)


def quantized_blocks(qtype, rng):
    values = rng.standard_normal((8, 256)).astype(np.float32)
    try:
        return np.ascontiguousarray(quantize(values, qtype)).view(np.uint8).reshape(-1)
    except NotImplementedError:  # the package cannot quantise K types
        return np.zeros(0, dtype=np.uint8)


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(20251130)
    manifest = []
    for qtype in TYPES:
        raw = np.concatenate([random_blocks(qtype, rng), quantized_blocks(qtype, rng)])
        block_size, block_bytes = GGML_QUANT_SIZES[qtype]
        expected = dequantize(raw.reshape(1, -1), qtype).astype("<f4").reshape(-1)
        assert expected.size == raw.size // block_bytes * block_size
        assert np.all(np.isfinite(expected)), qtype.name
        raw.tofile(os.path.join(out_dir, f"{qtype.name}.raw"))
        expected.tofile(os.path.join(out_dir, f"{qtype.name}.f32"))
        manifest.append(f"{qtype.name} {int(qtype)} {expected.size}")
    if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
        reader = GGUFReader(sys.argv[2])
        for t in reader.tensors:
            if t.name in ("blk.0.attn_k.weight", "blk.29.ffn_down.weight", "output_norm.weight"):
                values = dequantize(t.data, t.tensor_type).astype("<f4").reshape(-1)
                values.tofile(os.path.join(out_dir, f"REAL_{t.name}.f32"))
    with open(os.path.join(out_dir, "manifest.txt.part"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    os.replace(os.path.join(out_dir, "manifest.txt.part"), os.path.join(out_dir, "manifest.txt"))
    print(f"make_quant_fixtures: {len(manifest)} types -> {out_dir}")


if __name__ == "__main__":
    main()
