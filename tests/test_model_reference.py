"""The C runtime's logits against the independent NumPy reference
(tests/reference_model.py), on tiny random-weight models this test writes
(GGUF via the gguf package's GGUFWriter, and a Hugging Face folder) and on the
real SmolLM2 model (OBC_MODEL, 64-token prompt). A qwen2 Hugging Face folder
also comes from tests/gguf_to_hf.py (sharded, bf16). Every family the loader
accepts is covered: llama (GGUF, HF, Q8_0), Llama-3.1 rope scaling (GGUF
rope_freqs.weight, HF rope_scaling), linear rope scaling (GGUF, HF), qwen2 (biases; GGUF, HF) and qwen3 (per-head
Q/K norms, head_dim != dim / heads; GGUF in --weights native and f32, HF).
With --qwen3-8b it checks only one layer of Qwen3-8B's shape
(tests/make_random_gguf.py qwen3-8b-1layer, Q8_0, vocab 151936), in both
weight modes (tests/test_qwen3.sh runs it).

Pass criteria: max relative error <= 1e-4 over the last position, where
relative = max|C - ref| / max|ref| (the reference runs in float64), and the
same argmax at every position. Also: SmolLM2's logits with 1 and 2 threads
agree to fp32 rounding (the same bound) with the same argmax everywhere.
Prints each comparison and its error."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_cache  # noqa: E402
import reference_model  # noqa: E402

OBCACHE = os.environ.get("OBCACHE", "obcache")
# ctest runs tests side by side on few cores: idle OpenMP threads that spin
# (libgomp's default) then steal the cores the busy ones need.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
TOLERANCE = 1e-4


def c_logits(model, ids, scratch, threads=2, weights="native"):
    out = os.path.join(scratch, "logits.f32")
    subprocess.run([OBCACHE, "logits", "--model", model, "--ids", ",".join(map(str, ids)),
                    "--all", "-o", out, "--threads", str(threads), "--weights", weights],
                   check=True, stderr=subprocess.PIPE, text=True)
    return np.fromfile(out, dtype="<f4").reshape(len(ids), -1)


def compare(label, model, ids, scratch, modes=("native",)):
    """The C logits in each --weights mode of modes against the reference."""
    ref = reference_cache.cached("model_logits", [reference_cache.content(model), ids],
                                 lambda: reference_model.forward(reference_model.load(model), ids))
    ok = True
    for mode in modes:
        name = f"{label}, --weights {mode}" if len(modes) > 1 else label
        try:
            got = c_logits(model, ids, scratch, weights=mode)
        except subprocess.CalledProcessError as error:
            print(f"FAIL {name}: obcache logits exited with {error.returncode}: {error.stderr}")
            ok = False
            continue
        if got.shape != ref.shape:
            print(f"FAIL {name}: shape {got.shape} vs reference {ref.shape}")
            ok = False
            continue
        rel_last = np.abs(got[-1] - ref[-1]).max() / np.abs(ref[-1]).max()
        rel_all = np.abs(got - ref).max() / np.abs(ref).max()
        same = got.argmax(axis=1) == ref.argmax(axis=1)
        good = bool(rel_last <= TOLERANCE and same.all())
        print(f"{'ok  ' if good else 'FAIL'} {name}: {len(ids)} tokens, max relative error "
              f"last position {rel_last:.3g}, all positions {rel_all:.3g} (max abs "
              f"{np.abs(got - ref).max():.3g} of max |logit| {np.abs(ref).max():.3g}); argmax "
              f"equal at {same.sum()}/{len(ids)} positions")
        ok &= good
    return ok


def llama3_factors(head_dim, theta, factor, low, high, old_context):
    """Divisors of the inverse frequencies under Llama-3 rope scaling (what a
    converter writes as rope_freqs.weight)."""
    out = []
    for i in range(head_dim // 2):
        freq = theta ** (-2.0 * i / head_dim)
        wavelen = 2 * np.pi / freq
        if wavelen < old_context / high:
            out.append(1.0)
        elif wavelen > old_context / low:
            out.append(factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


class Tiny:
    """Random weights of a tiny model, named by role, (out, in) matrices."""

    def __init__(self, seed, n_layers, dim, n_heads, n_kv_heads, ffn, vocab, biases,
                 head_dim=None, qk_norm=False):
        rng = np.random.default_rng(seed)
        self.n_layers, self.dim, self.n_heads, self.n_kv_heads = n_layers, dim, n_heads, n_kv_heads
        self.ffn, self.vocab, self.head_dim = ffn, vocab, head_dim or dim // n_heads
        hd = self.head_dim

        def mat(rows, cols, scale=1.0):
            return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

        def vec(n, offset=0.0, scale=0.2):
            return (offset + scale * rng.standard_normal(n)).astype(np.float32)

        self.embed = (rng.standard_normal((vocab, dim))).astype(np.float32)
        self.norm = vec(dim, 1.0)
        self.lm_head = mat(vocab, dim, 2.0)
        self.layers = []
        for _ in range(n_layers):
            layer = {
                "attn_norm": vec(dim, 1.0), "q": mat(n_heads * hd, dim, 2.0),
                "k": mat(n_kv_heads * hd, dim, 2.0), "v": mat(n_kv_heads * hd, dim),
                "o": mat(dim, n_heads * hd), "ffn_norm": vec(dim, 1.0),
                "gate": mat(ffn, dim), "up": mat(ffn, dim), "down": mat(dim, ffn),
            }
            if biases:
                layer.update(bq=vec(n_heads * hd, 0, 0.5), bk=vec(n_kv_heads * hd, 0, 0.5),
                             bv=vec(n_kv_heads * hd, 0, 0.5))
            if qk_norm:  # Qwen3: far from 1, and different, so that a swap shows
                layer.update(q_norm=vec(hd, 2.0, 0.5), k_norm=vec(hd, 1.0, 0.3))
            self.layers.append(layer)


def permute_rows(w, n_head):
    """llama.cpp's converter permutation: halves (i, i + d/2) -> pairs (2i, 2i+1)."""
    rows = w.shape[0]
    hd = rows // n_head
    return w.reshape(n_head, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path, arch, tiny, theta=10000.0, rope_freqs=None, quantize=False, linear=None):
    import gguf

    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(os.path.basename(path))
    writer.add_block_count(tiny.n_layers)
    writer.add_context_length(256)
    writer.add_embedding_length(tiny.dim)
    writer.add_feed_forward_length(tiny.ffn)
    writer.add_head_count(tiny.n_heads)
    writer.add_head_count_kv(tiny.n_kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(theta)
    if linear:
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(linear)
    writer.add_rope_dimension_count(tiny.head_dim)
    writer.add_key_length(tiny.head_dim)
    writer.add_value_length(tiny.head_dim)
    writer.add_vocab_size(tiny.vocab)

    def add(name, array):
        if quantize and array.ndim == 2:
            q = gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, array)

    add("token_embd.weight", tiny.embed)
    add("output_norm.weight", tiny.norm)
    add("output.weight", tiny.lm_head)
    if rope_freqs is not None:
        add("rope_freqs.weight", rope_freqs)
    names = {"attn_norm": "attn_norm.weight", "q": "attn_q.weight", "k": "attn_k.weight",
             "v": "attn_v.weight", "o": "attn_output.weight", "ffn_norm": "ffn_norm.weight",
             "gate": "ffn_gate.weight", "up": "ffn_up.weight", "down": "ffn_down.weight",
             "bq": "attn_q.bias", "bk": "attn_k.bias", "bv": "attn_v.bias",
             "q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight"}
    for i, layer in enumerate(tiny.layers):
        for role, array in layer.items():
            if arch == "llama" and role in ("q", "k"):  # as llama.cpp's converter does
                array = permute_rows(array, tiny.n_heads if role == "q" else tiny.n_kv_heads)
            add(f"blk.{i}.{names[role]}", array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_hf(folder, tiny, theta, scaling):
    from safetensors.numpy import save_file

    os.makedirs(folder, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": tiny.dim, "intermediate_size": tiny.ffn,
        "num_hidden_layers": tiny.n_layers, "num_attention_heads": tiny.n_heads,
        "num_key_value_heads": tiny.n_kv_heads, "vocab_size": tiny.vocab,
        "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": theta,
        "rope_scaling": scaling, "tie_word_embeddings": True, "torch_dtype": "float32",
    }
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    names = {"attn_norm": "input_layernorm.weight", "q": "self_attn.q_proj.weight",
             "k": "self_attn.k_proj.weight", "v": "self_attn.v_proj.weight",
             "o": "self_attn.o_proj.weight", "ffn_norm": "post_attention_layernorm.weight",
             "gate": "mlp.gate_proj.weight", "up": "mlp.up_proj.weight",
             "down": "mlp.down_proj.weight"}
    tensors = {"model.embed_tokens.weight": tiny.embed, "model.norm.weight": tiny.norm}
    for i, layer in enumerate(tiny.layers):
        for role, array in layer.items():
            tensors[f"model.layers.{i}.{names[role]}"] = array
    save_file(tensors, os.path.join(folder, "model.safetensors"))


def smollm2_ids(model_path, count):
    """Token ids of an English passage, looked up word by word in the GGUF
    vocabulary (words that are single tokens, with the leading-space marker);
    independent of the C tokenizer. Once per run (tests/reference_cache.py)."""
    return reference_cache.cached("smollm2_ids", [reference_cache.content(model_path), count],
                                  lambda: _smollm2_ids(model_path, count))


def _smollm2_ids(model_path, count):
    import gguf

    reader = gguf.GGUFReader(model_path)
    field = reader.fields["tokenizer.ggml.tokens"]
    vocab = {bytes(field.parts[i]).decode("utf-8"): n for n, i in enumerate(field.data)}
    text = ("In the beginning God created the heaven and the earth. And the earth was "
            "without form, and void; and darkness was upon the face of the deep. And the "
            "Spirit of God moved upon the face of the waters. And God said, Let there be "
            "light: and there was light. And God saw the light, that it was good: and God "
            "divided the light from the darkness. And God called the light Day, and the "
            "darkness he called Night. And the evening and the morning were the first day.")
    ids = []
    for i, word in enumerate(text.replace(",", " ,").replace(".", " .").replace(":", " :")
                             .replace(";", " ;").split()):
        key = word if i == 0 or word in ",.:;" else "\u0120" + word
        if key in vocab:
            ids.append(vocab[key])
        if len(ids) == count:
            break
    assert len(ids) == count, f"only {len(ids)} single-token words"
    return ids


def threads_agree(model, prompt, scratch):
    """The runtime promises equality to fp32 rounding across thread counts, not
    bit-identity: OpenBLAS cuts every GEMM into per-thread tiles whose edge
    kernels sum in another order (measured 2.2e-6 on one processor, 0 on
    another). Two fp32 runs that differ only in summation order are each within
    the fp32-vs-float64 bound TOLERANCE of the exact logits, so the bound for
    their difference is that same fp32 rounding budget; a race or a thread-
    dependent bug shows as O(1) differences or another argmax."""
    one, two = c_logits(model, prompt, scratch, 1), c_logits(model, prompt, scratch, 2)
    rel = np.abs(one - two).max() / np.abs(two).max()
    same_argmax = bool((one.argmax(1) == two.argmax(1)).all())
    good = bool(rel <= TOLERANCE) and same_argmax
    print(f"{'ok  ' if good else 'FAIL'} SmolLM2 with 1 vs 2 threads: max relative difference "
          f"{rel:.3g} (allowed {TOLERANCE:g}, fp32 rounding), argmax "
          f"{'equal' if same_argmax else 'DIFFERS'} at every position")
    return good


def qwen3_8b(scratch):
    """One layer of Qwen3-8B's shape, Q8_0, in both weight modes."""
    path = os.path.join(scratch, "qwen3_8b_1layer.gguf")
    maker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_random_gguf.py")
    subprocess.run([sys.executable, maker, "qwen3-8b-1layer", "Q8_0", os.environ["OBC_MODEL"],
                    path], check=True)
    ids = [int(x) for x in (np.arange(24) * 6151 + 11) % 151936]
    return compare("Qwen3-8B shape, 1 layer, Q8_0 GGUF", path, ids, scratch, ("native", "f32"))


def main():
    ok = True
    ids = [int(x) for x in (np.arange(40) * 37 + 11) % 200]
    with tempfile.TemporaryDirectory(dir=os.environ.get("OBC_TMP")) as scratch:
        if sys.argv[1:] == ["--qwen3-8b"]:
            ok = qwen3_8b(scratch)
            print("all comparisons passed" if ok else "some comparisons FAILED")
            return 0 if ok else 1
        path = os.path.join(scratch, "llama_gqa2.gguf")
        write_gguf(path, "llama", Tiny(1, 2, 64, 4, 2, 96, 200, False))
        ok &= compare("tiny llama GGUF, GQA 2:1", path, ids, scratch)

        path = os.path.join(scratch, "llama_gqa4_rope3.gguf")
        factors = llama3_factors(16, 500000.0, 8.0, 1.0, 4.0, 64)
        write_gguf(path, "llama", Tiny(2, 3, 128, 8, 2, 160, 200, False), 500000.0, factors)
        ok &= compare("tiny llama GGUF, GQA 4:1, Llama-3 rope_freqs.weight", path, ids, scratch)

        path = os.path.join(scratch, "qwen2_bias.gguf")
        write_gguf(path, "qwen2", Tiny(3, 2, 64, 4, 2, 96, 200, True))
        ok &= compare("tiny qwen2 GGUF, GQA 2:1, q/k/v biases", path, ids, scratch)

        converter = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gguf_to_hf.py")
        if os.path.exists(converter):  # the loader's GGUF -> HF tool: sharded bf16 qwen2
            folder = os.path.join(scratch, "qwen2_hf")
            subprocess.run([sys.executable, converter, path, folder, "--dtype", "bf16",
                            "--shards", "2"], check=True, stdout=subprocess.DEVNULL)
            ok &= compare("tiny qwen2 HF folder (gguf_to_hf.py), bf16, 2 shards, biases",
                          folder, ids, scratch)

        # Qwen3: head_dim 32 with dim 64 and 4 heads (q width 128 != dim), untied
        path = os.path.join(scratch, "qwen3.gguf")
        write_gguf(path, "qwen3", Tiny(6, 2, 64, 4, 2, 96, 200, False, 32, True), 1e6)
        ok &= compare("tiny qwen3 GGUF, GQA 2:1, q/k norms, head_dim 32 != 64/4", path, ids,
                      scratch)
        path = os.path.join(scratch, "qwen3_q8.gguf")
        write_gguf(path, "qwen3", Tiny(7, 2, 64, 2, 1, 96, 200, False, 64, True), 1e6,
                   quantize=True)
        ok &= compare("tiny qwen3 GGUF, GQA 2:1, q/k norms, head_dim 64 != 64/2, Q8_0", path,
                      ids, scratch, ("native", "f32"))
        if os.path.exists(converter):
            folder = os.path.join(scratch, "qwen3_hf")
            subprocess.run([sys.executable, converter, path, folder, "--dtype", "f32"],
                           check=True, stdout=subprocess.DEVNULL)
            ok &= compare("tiny qwen3 HF folder (gguf_to_hf.py), f32, untied", folder, ids,
                          scratch)

        path = os.path.join(scratch, "llama_q8.gguf")
        write_gguf(path, "llama", Tiny(4, 2, 64, 8, 2, 96, 200, False), quantize=True)
        ok &= compare("tiny llama GGUF, GQA 4:1, Q8_0 weights", path, ids, scratch)

        path = os.path.join(scratch, "llama_linear.gguf")
        write_gguf(path, "llama", Tiny(8, 2, 64, 4, 2, 96, 200, False), linear=4.0)
        ok &= compare("tiny llama GGUF, linear rope scaling (factor 4)", path, ids, scratch)
        folder = os.path.join(scratch, "llama_linear_hf")
        write_hf(folder, Tiny(9, 2, 64, 4, 2, 96, 200, False), 10000.0,
                 {"rope_type": "linear", "factor": 4.0})
        ok &= compare("tiny llama HF folder, rope_scaling linear (factor 4), tied", folder, ids,
                      scratch)

        folder = os.path.join(scratch, "llama_hf")
        scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
        write_hf(folder, Tiny(5, 2, 128, 8, 4, 160, 200, False), 500000.0, scaling)
        ok &= compare("tiny llama HF folder, GQA 2:1, rope_scaling llama3, tied", folder, ids,
                      scratch)

        model = os.environ.get("OBC_MODEL")
        if model and os.path.exists(model):
            prompt = smollm2_ids(model, 64)
            ok &= compare("SmolLM2-135M-Instruct GGUF", model, prompt, scratch)
            ok &= threads_agree(model, prompt, scratch)
        else:
            print(f"FAIL SmolLM2: model not found at {model} (run scripts/setup.sh)")
            ok = False
    print("all comparisons passed" if ok else "some comparisons FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
