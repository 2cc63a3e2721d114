#!/usr/bin/env python3
"""Builds the seed corpus of every libFuzzer harness of tests/fuzz/ from the
project's own fixtures (CONTRIBUTING.md, "Fuzzing"), deterministically:

  gguf         tiny llama, qwen2 and qwen3 GGUFs (the gguf package's GGUFWriter, as the
               Python references write them) with a byte-level BPE tokenizer
               in their metadata, one with Q8_0 weights, one metadata only, and
               a metadata-only one with a SentencePiece vocabulary
  safetensors  config.json NUL model.safetensors of the Hugging Face folders
               tests/gguf_to_hf.py makes of those GGUFs (F32, F16, BF16)
  tokenizer    tokenizer.json NUL tokenizer_config.json NUL text, from the same
               folders, SentencePiece-style ones (normalizers, Metaspace, byte
               fallback), and SmolLM2's real tokenizer.json when the default
               model is there
  trace        traces of `obcache synth` (f32, f16, deflate, attention rows,
               column sums (schema 3),
               logits), in whatever schema the current writer writes
  keep_file    keep files of `obcache evict` on the harness's own trace
               (fuzz_keep_file with OBC_FUZZ_KEEP_TRACE), and one made for
               another trace of the same shape
  sweep_folder plan.json NUL complete.json: hand-made plans of 1 and 6 cells
               and the manifest of fuzz_sweep_folder.c's fixed cell files
  eval_sample  sample.json of an eval's cell under fuzz_eval_sample.c's
               configuration: a complete one, one with a row twice, one with
               a policy of another plan
  eval_folder  plan.json NUL sample.json NUL prompt.json of a real eval (one
               sample of 512 tokens, knorm and snapkv at 25%, run with the
               default model when it is there), and its plan made with a
               --score-cmd and with two tasks
  legacy       tests/data/trace_v1.h5 (schema 1), the same relabelled
               schema_version 2, and a schema-1 keep file for it: read through
               the child process of traces/trace_legacy.h

and, for each, damaged variants: cut in half, and three bytes flipped at
places drawn from a generator seeded by the file's name.

usage: make_seeds.py --out DIR --obcache OBCACHE --keep-harness FUZZ_KEEP_FILE [--model GGUF]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, TESTS)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
TRAINING_TEXT = ("The needle is hidden in the haystack. Where is the needle? The answer is 42. "
                 "In the beginning God created the heaven and the earth. 0123456789 "
                 "na\u00efve caf\u00e9 \u00fcber \U0001F600 <tag> x=1; y = x + 2;\n")


def bytes_to_unicode():
    """GPT-2's byte -> printable character map of byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tiny_vocab(n_merges=64):
    """Specials, the 256 byte symbols, then n_merges merges learnt greedily on
    TRAINING_TEXT (most frequent pair first, ties by the pair itself)."""
    table = bytes_to_unicode()
    words = [[table[b] for b in (" " + w if i else w).encode()]
             for i, w in enumerate(TRAINING_TEXT.split(" "))]
    tokens = SPECIALS + [table[b] for b in range(256)]
    merges = []
    for _ in range(n_merges):
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        (a, b), _ = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == a and w[i + 1] == b:
                    w[i:i + 2] = [a + b]
                i += 1
    return tokens, merges


def write_gguf(path, arch, tensors=True, quantize=False, seed=1):
    import gguf

    tokens, merges = tiny_vocab()
    dim, ffn, n_heads, n_kv, n_layers, vocab = 16, 32, 4, 2, 2, len(tokens)
    hd = dim // n_heads
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name("fuzz-seed")
    writer.add_block_count(n_layers)
    writer.add_context_length(64)
    writer.add_embedding_length(dim)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(n_heads)
    writer.add_head_count_kv(n_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_rope_dimension_count(hd)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm" if arch == "llama" else "qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIALS else 1 for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(arch == "llama")
    writer.add_chat_template(CHATML)

    def add(name, *shape):
        array = (0.1 * rng.standard_normal(shape)).astype(np.float32)
        if quantize and array.ndim == 2 and array.shape[-1] % 32 == 0:  # Q8_0 blocks of 32
            q = gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, array)

    if tensors:
        add("token_embd.weight", vocab, dim)
        add("output_norm.weight", dim)
        for i in range(n_layers):
            for name, shape in (("attn_norm", (dim,)), ("attn_q", (n_heads * hd, dim)),
                                ("attn_k", (n_kv * hd, dim)), ("attn_v", (n_kv * hd, dim)),
                                ("attn_output", (dim, n_heads * hd)), ("ffn_norm", (dim,)),
                                ("ffn_gate", (ffn, dim)), ("ffn_up", (ffn, dim)),
                                ("ffn_down", (dim, ffn))):
                add(f"blk.{i}.{name}.weight", *shape)
            if arch == "qwen2":
                for name, rows in (("attn_q", n_heads * hd), ("attn_k", n_kv * hd), ("attn_v", n_kv * hd)):
                    add(f"blk.{i}.{name}.bias", rows)
            if arch == "qwen3":
                add(f"blk.{i}.attn_q_norm.weight", hd)
                add(f"blk.{i}.attn_k_norm.weight", hd)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def put(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def damaged(folder):
    """Cut-in-half and byte-flipped copies of every seed of folder."""
    for name in sorted(os.listdir(folder)):
        data = read(os.path.join(folder, name))
        if len(data) < 2:
            continue
        put(folder, name + ".cut", data[:len(data) // 2])
        rng = random.Random(name)
        flipped = bytearray(data)
        for _ in range(3):
            flipped[rng.randrange(len(data))] ^= 0xFF
        put(folder, name + ".flip", bytes(flipped))


def hf_folder(gguf_path, folder, dtype):
    subprocess.run([sys.executable, os.path.join(TESTS, "gguf_to_hf.py"), gguf_path, folder,
                    "--dtype", dtype, "--tokenizer"], check=True, stdout=subprocess.DEVNULL)


def tokenizer_seed(folder, text):
    config = os.path.join(folder, "tokenizer_config.json")
    return (read(os.path.join(folder, "tokenizer.json")) + b"\0" +
            (read(config) if os.path.exists(config) else b"") + b"\0" + text.encode())


def gguf_and_hf_seeds(out, work):
    seeds = {h: os.path.join(out, h) for h in ("gguf", "safetensors", "tokenizer")}
    archs, dtypes = ("llama", "qwen2", "qwen3"), ("f32", "f16", "bf16")
    for arch in archs:
        path = os.path.join(work, f"{arch}.gguf")
        write_gguf(path, arch)
        shutil.copy(path, os.path.join(seeds["gguf"], f"{arch}.gguf"))
    # The conversions (a Python process each, most of this function's time)
    # two at a time.
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda job: hf_folder(os.path.join(work, f"{job[0]}.gguf"),
                                            os.path.join(work, f"{job[0]}-{job[1]}"), job[1]),
                      [(arch, dtype) for arch in archs for dtype in dtypes]))
    for arch in archs:
        for dtype in dtypes:
            folder = os.path.join(work, f"{arch}-{dtype}")
            put(seeds["safetensors"], f"{arch}-{dtype}",
                read(os.path.join(folder, "config.json")) + b"\0" +
                read(os.path.join(folder, "model.safetensors")))
        folder = os.path.join(work, f"{arch}-f32")
        put(seeds["tokenizer"], f"{arch}", tokenizer_seed(folder, TRAINING_TEXT))
        put(seeds["tokenizer"], f"{arch}-noconfig",
            read(os.path.join(folder, "tokenizer.json")) + b"\0\0" + "a 42 \u00e9".encode())
    write_gguf(os.path.join(seeds["gguf"], "llama-q8_0.gguf"), "llama", quantize=True)
    write_gguf(os.path.join(seeds["gguf"], "metadata-only.gguf"), "llama", tensors=False)
    put(seeds["safetensors"], "config-only",
        read(os.path.join(work, "llama-f32", "config.json")))
    put(seeds["safetensors"], "empty-header", b"{}\0" + (2).to_bytes(8, "little") + b"{}")
    # tokenizer.json with merges in the older "left right" string form
    data = json.loads(read(os.path.join(work, "llama-f32", "tokenizer.json")))
    data["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    put(seeds["tokenizer"], "merges-as-strings", json.dumps(data).encode() + b"\0\0hello")
    sentencepiece_seeds(seeds)


def sentencepiece_vocab():
    """A SentencePiece-style vocabulary: <unk> <s> </s>, the byte tokens, the
    letters with and without the space marker, and merges of 'the'."""
    space = "\u2581"
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [space] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["\u00e9"]
    merges = [(space, "t"), ("h", "e"), (space + "t", "he")]
    tokens += [left + right for left, right in merges]
    return tokens, merges


def sentencepiece_seeds(seeds):
    """tokenizer.json in the Llama 2 (normalizers) and Mistral (Metaspace) forms,
    with every normalizer the loader reads, and a GGUF with tokenizer.ggml.model llama."""
    import gguf

    tokens, merges = sentencepiece_vocab()
    model = {"type": "BPE", "vocab": {t: i for i, t in enumerate(tokens)},
             "merges": [list(m) for m in merges], "byte_fallback": True, "unk_token": "<unk>"}
    added = [{"id": i, "content": t, "special": True} for i, t in enumerate(tokens[:3])]
    llama2 = {"added_tokens": added, "model": model,
              "normalizer": {"type": "Sequence", "normalizers": [
                  {"type": "Prepend", "prepend": "\u2581"},
                  {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
              "pre_tokenizer": None,
              "decoder": {"type": "Sequence", "decoders": [
                  {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                  {"type": "ByteFallback"}, {"type": "Fuse"},
                  {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}
    mistral = dict(llama2, normalizer={"type": "Sequence", "normalizers": [
        {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True,
                                                  "strip_right": False}]},
        pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                       "split": True},
        decoder={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"})
    text = "the cat \u00e9t\u00e9 \ufb01 \ud55c 😀 <s>the</s>".encode()
    for name, data in (("sentencepiece-llama2", llama2), ("sentencepiece-metaspace", mistral)):
        put(seeds["tokenizer"], name, json.dumps(data).encode() + b"\0\0" + text)
    path = os.path.join(seeds["gguf"], "sentencepiece.gguf")
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * (len(tokens) - len(merges)) + [-1.0 - r for r in range(len(merges))])
    writer.add_token_types([2, 3, 3] + [6] * 256 + [1] * (len(tokens) - 259))
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def real_tokenizer_seed(out, work, model):
    """SmolLM2's tokenizer.json, as tests/gguf_to_hf.py builds it from the model."""
    if not model or not os.path.exists(model):
        return
    import gguf
    import gguf_to_hf

    folder = os.path.join(work, "smollm2")
    os.makedirs(folder, exist_ok=True)
    gguf_to_hf.write_tokenizer(gguf.GGUFReader(model), folder)
    put(os.path.join(out, "tokenizer"), "smollm2", tokenizer_seed(folder, TRAINING_TEXT))


def trace_seeds(out, work, obcache):
    folder = os.path.join(out, "trace")
    small = ["--layers", "1", "--heads", "2", "--kv-heads", "1", "--head-dim", "4", "--length", "12",
             "--rows", "4", "--decode", "2", "--needle-length", "2"]
    variants = {"default": [], "small": small, "small-f16": small + ["--dtype", "f16"],
                "small-deflate": small + ["--compress", "4"], "small-attn": small + ["--store-attn"],
                "small-logits": small + ["--vocab", "16"],
                "gqa": small + ["--heads", "4", "--kv-heads", "2", "--seed", "2"],
                "small-column-sums": small + ["--rows", "12", "--column-sums"]}
    for name, args in variants.items():
        subprocess.run([obcache, "synth", "-o", os.path.join(folder, name + ".h5"), "--threads", "1"]
                       + args, check=True, stdout=subprocess.DEVNULL)


def keep_seeds(out, work, obcache, harness):
    folder = os.path.join(out, "keep_file")
    trace = os.path.join(work, "keep-trace.h5")
    subprocess.run([harness], env=dict(os.environ, OBC_FUZZ_KEEP_TRACE=trace), check=True)
    policies = {"obc_vk": [], "recency": ["--score", "recency", "--sinks", "2", "--recent", "4"],
                "random-adakv": ["--score", "random", "--alloc", "adakv", "--budget", "8"],
                "agnostic": ["--protocol", "agnostic", "--budget", "0.25"]}
    for name, args in policies.items():
        subprocess.run([obcache, "evict", trace, "-o", os.path.join(folder, name + ".h5")] + args,
                       check=True, stdout=subprocess.DEVNULL)
    # a keep file made for another trace of the same shape (seed 2)
    other = os.path.join(work, "other-trace.h5")
    subprocess.run([obcache, "synth", "-o", other, "--seed", "2"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([obcache, "evict", other, "-o", os.path.join(folder, "other-trace.h5")],
                   check=True, stdout=subprocess.DEVNULL)


def legacy_seeds(out, work, obcache, source):
    """Schema-1 files, read through the child process: tests/data/trace_v1.h5,
    the same relabelled schema_version 2 (refused by the format check), and a
    keep file for it rewritten in the unchecksummed format of schema 1 (h5py,
    libver earliest; skipped without h5py)."""
    folder = os.path.join(out, "legacy")
    v1 = os.path.join(source, "tests", "data", "trace_v1.h5")
    put(folder, "trace_v1.h5", read(v1))
    try:
        import h5py
    except ImportError:
        return
    relabelled = os.path.join(folder, "trace_v1-says-2.h5")
    shutil.copy(v1, relabelled)
    with h5py.File(relabelled, "r+") as f:
        f.attrs["schema_version"] = 2
    keep2 = os.path.join(work, "keep-v1-trace.h5")
    subprocess.run([obcache, "evict", v1, "--budget", "4", "-o", keep2], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = h5py.string_dtype()
    with h5py.File(keep2, "r") as src, \
            h5py.File(os.path.join(folder, "keep_v1.h5"), "w", libver="earliest") as dst:
        for name, dataset in src.items():
            dst.create_dataset(name, data=dataset[()])
        for name, value in src.attrs.items():
            if isinstance(value, bytes):
                value = value.decode()
                if name == "schema":
                    value = "obcache-keep/1"
                dst.attrs.create(name, value, dtype=text)
            else:
                dst.attrs[name] = value


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def sweep_folder_seeds(out):
    """plan.json NUL complete.json of cell 0; the manifest lists the fixed
    rows.csv and cell.json of fuzz_sweep_folder.c with their true checksums."""
    folder = os.path.join(out, "sweep_folder")
    rows = b"160,0,4242,1,1,attn,40,0.500000,0.250000\n"
    cell = b'{"id": 0, "needle": "4242", "answer": " 4242", "found": true}\n'
    files = [{"path": name, "bytes": len(data), "fnv1a64": "%016x" % fnv1a64(data)}
             for name, data in (("cell.json", cell), ("rows.csv", rows))]
    manifest = {"format": "obcache-sweep-cell/1", "id": 0, "name": "L160_D0", "files": files}

    def plan(lengths, depths, options):
        cells = [{"id": i * len(depths) + j, "name": "L%d_D%d" % (n, d), "length": n, "depth": d}
                 for i, n in enumerate(lengths) for j, d in enumerate(depths)]
        return {"format": "obcache-sweep-plan/1", "obcache_version": "0.1.0",
                "model": {"path": "/models/m.gguf", "bytes": 98362432,
                          "fnv1a64": "119cdcb571abd979"},
                "haystack": "noise", "seed": "1", "options": options, "cells": cells}

    variants = {"one": plan([160], [0], ["--haystack", "noise", "--decode", "2"]),
                "grid": plan([160, 200], [0, 50, 100], ["--rows", "16", "--window", "64,1"]),
                "bad-manifest": plan([160], [0, 100], [])}
    for name, p in variants.items():
        m = dict(manifest)
        if name == "bad-manifest":
            m["files"] = [dict(files[0], bytes=1), {"path": "../../etc/passwd", "bytes": 1,
                                                     "fnv1a64": "0" * 16}]
        put(folder, name, json.dumps(p, indent=1).encode() + b"\0" + json.dumps(m).encode())


def eval_sample_seeds(out):
    """sample.json files for the default configuration of eval/eval.h
    (eval_config_default): niah_single_1 at 1024 tokens, snapkv and
    snapkv+obc_k and oracle@T at 10, 25 and 50%, agnostic."""
    folder = os.path.join(out, "eval_sample")
    rows = []
    for policy in ("oracle@T", "snapkv", "snapkv+obc_k"):
        for budget, kept in (("10%", 84), ("25%", 212), ("50%", 424)):
            rows.append({"answer": " 5982137.", "score": 1, "correct": True, "policy": policy,
                         "budget": budget, "protocol": "agnostic", "kept": kept,
                         "candidates": 849, "recall": None if policy == "oracle@T" else 0.5})
    sample = {"task": "niah_single_1", "length": 1024, "sample": 0, "seed": "1", "tokens": 887,
              "decode": 128, "oracle_steps": 9, "answers": ["5982137"],
              "full": {"answer": " 5982137.", "score": 1, "correct": True}, "rows": rows,
              "seconds": 8.9}
    put(folder, "complete", json.dumps(sample, indent=1).encode())
    twice = dict(sample, rows=rows[:-1] + rows[:1])
    put(folder, "row-twice", json.dumps(twice).encode())
    other = dict(sample, rows=rows[:-1] + [dict(rows[-1], policy="tova")])
    put(folder, "other-policy", json.dumps(other).encode())


def eval_folder_seeds(out, work, obcache, model):
    """A finished eval's plan.json, cell 0's sample.json and prompt.json, one
    input; then the same cell under plans made with other options."""
    folder = os.path.join(out, "eval_folder")
    if not model or not os.path.exists(model):
        put(folder, "empty", b"{}\0{}\0{}")
        return
    base = ["--tasks", "niah_single_1", "--samples", "1", "--length", "512",
            "--max-new-tokens", "2", "--scores", "knorm,snapkv", "--budgets", "25%",
            "--model", model, "--threads", "1"]
    ev = os.path.join(work, "eval")
    subprocess.run([obcache, "eval"] + base + ["--no-figures", "-o", ev], check=True,
                   stdout=subprocess.DEVNULL)
    cell = read(os.path.join(ev, "cells", "0", "sample.json")) + b"\0" + \
        read(os.path.join(ev, "cells", "0", "prompt.json"))
    put(folder, "complete", read(os.path.join(ev, "plan.json")) + b"\0" + cell)
    plans = {"score-cmd": ["--score-cmd", "mine=python3 score.py"],
             "two-tasks": ["--tasks", "niah_single_1,vt"]}
    for name, extra in plans.items():
        planned = os.path.join(work, "plan-" + name)
        subprocess.run([obcache, "eval"] + base + extra + ["--plan", "-o", planned], check=True,
                       stdout=subprocess.DEVNULL)
        put(folder, name, read(os.path.join(planned, "plan.json")) + b"\0" + cell)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--obcache", required=True)
    ap.add_argument("--keep-harness", required=True)
    ap.add_argument("--model")
    args = ap.parse_args()
    tmp = args.out.rstrip("/") + ".part"
    shutil.rmtree(tmp, ignore_errors=True)
    for harness in ("gguf", "safetensors", "tokenizer", "trace", "keep_file", "sweep_folder",
                    "eval_sample", "eval_folder", "legacy"):
        os.makedirs(os.path.join(tmp, harness))
    # The eval's seeds, an `obcache eval` run (a third of the time), are made
    # beside the others, each in its own folders.
    with tempfile.TemporaryDirectory() as work, ThreadPoolExecutor(max_workers=1) as side:
        evaluated = side.submit(eval_folder_seeds, tmp, work, args.obcache, args.model)
        gguf_and_hf_seeds(tmp, work)
        real_tokenizer_seed(tmp, work, args.model)
        trace_seeds(tmp, work, args.obcache)
        keep_seeds(tmp, work, args.obcache, args.keep_harness)
        sweep_folder_seeds(tmp)
        eval_sample_seeds(tmp)
        legacy_seeds(tmp, work, args.obcache,
                     os.path.dirname(os.path.dirname(HERE)))
        evaluated.result()
    for harness in os.listdir(tmp):
        damaged(os.path.join(tmp, harness))
    shutil.rmtree(args.out, ignore_errors=True)
    os.replace(tmp, args.out)
    counts = {h: len(os.listdir(os.path.join(args.out, h))) for h in sorted(os.listdir(args.out))}
    print("make_seeds: " + ", ".join(f"{h} {n}" for h, n in counts.items()) + f" -> {args.out}")


if __name__ == "__main__":
    main()
