#!/usr/bin/env python3
"""Write a tiny random-weight Qwen3 Hugging Face folder (a test fixture).

config.json, model.safetensors (F32, fixed seed) and, unless --tokenizer none,
a tokenizer.json that the `tokenizers` library writes: a byte-level BPE
trained on a few sentences, with its normalizer set by --tokenizer:
  empty    "normalizer": {"type": "Sequence", "normalizers": []}, what
           `tokenizers` writes for an empty normalizers.Sequence
  unknown  a BertNormalizer (a normalizer obcache does not read)
  none     no tokenizer.json at all

usage: make_tiny_hf.py OUT_DIR [--tokenizer empty|unknown|none]
"""
import argparse
import json
import os

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

TEXT = ["The quick brown fox jumps over the lazy dog.", "Hello world! The needle is 42.",
        "Tiny models for tests only."] * 4


def write_tokenizer(out_dir, kind):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.normalizer = normalizers.Sequence([]) if kind == "empty" else normalizers.BertNormalizer()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    return tok.get_vocab_size()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--tokenizer", choices=["empty", "unknown", "none"], default="empty")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    vocab = 300 if args.tokenizer == "none" else write_tokenizer(args.out_dir, args.tokenizer)
    dim, heads, kv, head_dim, ffn, layers = 64, 4, 2, 16, 128, 2
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": dim,
              "intermediate_size": ffn, "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": kv, "head_dim": head_dim, "rms_norm_eps": 1e-6,
              "rope_theta": 1e6, "max_position_embeddings": 512, "vocab_size": vocab,
              "tie_word_embeddings": True, "hidden_act": "silu", "rope_scaling": None,
              "torch_dtype": "float32"}
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    rng = np.random.default_rng(7)

    def matrix(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    tensors = {"model.embed_tokens.weight": matrix(vocab, dim),
               "model.norm.weight": np.ones(dim, np.float32)}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.update({
            p + "input_layernorm.weight": np.ones(dim, np.float32),
            p + "post_attention_layernorm.weight": np.ones(dim, np.float32),
            p + "self_attn.q_proj.weight": matrix(heads * head_dim, dim),
            p + "self_attn.k_proj.weight": matrix(kv * head_dim, dim),
            p + "self_attn.v_proj.weight": matrix(kv * head_dim, dim),
            p + "self_attn.o_proj.weight": matrix(dim, heads * head_dim),
            p + "self_attn.q_norm.weight": np.ones(head_dim, np.float32),
            p + "self_attn.k_norm.weight": np.ones(head_dim, np.float32),
            p + "mlp.gate_proj.weight": matrix(ffn, dim),
            p + "mlp.up_proj.weight": matrix(ffn, dim),
            p + "mlp.down_proj.weight": matrix(dim, ffn)})
    save_file(tensors, os.path.join(args.out_dir, "model.safetensors"), metadata={"format": "pt"})


if __name__ == "__main__":
    main()
