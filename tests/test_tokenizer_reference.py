#!/usr/bin/env python3
"""obcache's tokenizer against an independent reference: the tokenizer that
`transformers` builds from the GGUF file's own metadata (its GGUF tokenizer
builder on top of the `tokenizers` package; the metadata is read with the
`gguf` package because transformers' own GGUF reader imports PyTorch).

Compared, on tests/tokenizer_corpus.txt (line by line and as one text) and on
1000 lines drawn at random (fixed seed) from characters the regexes tell apart:
  1. the ids of the default model's GGUF (pre-tokenizer "smollm");
  2. decode(encode(x)) == x, through `obcache tokenize --ids`;
  3. the ids when the same tokenizer is loaded from a tokenizer.json +
     tokenizer_config.json written by the reference (the Hugging Face path);
  4. the ids of metadata-only GGUF copies whose tokenizer.ggml.pre is
     "llama-bpe" and "qwen2", where transformers uses its own split regexes;
  5. the chat prompt ids: the GGUF's chat template rendered by transformers
     (apply_chat_template, Jinja) and encoded by the reference, against
     `obcache tokenize --chat`, with and without a system message.

transformers knows no "smollm" pre-tokenizer and falls back to GPT-2's regex;
SmolLM2's own tokenizer.json (and llama.cpp's "smollm") split digits one by
one first. The reference gets that pre-tokenizer (Digits + ByteLevel); the
number of corpus lines where the fallback would differ is printed.
Exits non-zero on any difference."""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import gguf
from tokenizers import pre_tokenizers

try:
    from transformers import PreTrainedTokenizerFast
    try:  # transformers 5
        from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer
    except ImportError:  # transformers 4
        from transformers.integrations.ggml import convert_gguf_tokenizer
except ImportError as error:  # a set-up problem, not a test result
    sys.exit(f"test_tokenizer_reference: needs the transformers package ({error}); run scripts/setup.sh")

OBCACHE = os.environ["OBCACHE"]
SOURCE = os.environ.get("OBC_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
MODEL = os.environ.get("OBC_MODEL") or os.path.join(SOURCE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
# Every file of a run lies in one folder, made by main() (not on import: the
# capture reference imports this module) and removed when every check passed.
TMP = None
CORPUS = os.path.join(SOURCE, "tests", "tokenizer_corpus.txt")

failures = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        failures.append(name)


def read_metadata(path):
    reader = gguf.GGUFReader(path)

    def value(key, default=None):
        field = reader.fields.get(key)
        return field.contents() if field is not None else default

    return {
        "architecture": value("general.architecture"),
        "model": value("tokenizer.ggml.model"),
        "pre": value("tokenizer.ggml.pre"),
        "tokens": value("tokenizer.ggml.tokens"),
        "token_type": value("tokenizer.ggml.token_type"),
        "merges": value("tokenizer.ggml.merges"),
        "bos": value("tokenizer.ggml.bos_token_id"),
        "eos": value("tokenizer.ggml.eos_token_id"),
        "add_bos": bool(value("tokenizer.ggml.add_bos_token", False)),
        "chat_template": value("tokenizer.chat_template"),
    }


def smollm_pre_tokenizer():
    return pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])


def build_reference(meta, fix_smollm=True):
    """transformers' tokenizer for the metadata (backend tokenizers.Tokenizer)."""
    tokenizer_dict = {
        "tokenizer_type": meta["model"], "pre_tokenizer_type": meta["pre"], "tokens": meta["tokens"],
        "token_type": meta["token_type"], "merges": meta["merges"], "bos_token_id": meta["bos"],
        "eos_token_id": meta["eos"],
    }
    backend, _ = convert_gguf_tokenizer(meta["architecture"], tokenizer_dict)
    if fix_smollm and meta["pre"] == "smollm":
        backend.pre_tokenizer = smollm_pre_tokenizer()
    return backend


def obcache_lines(model, path, *extra):
    out = subprocess.run([OBCACHE, "tokenize", "--model", model, "--lines", "--file", path, *extra],
                         check=True, capture_output=True, text=True).stdout
    return [[int(x) for x in line.split()] for line in out.split("\n")[:-1]]


def obcache_ids(model, *args):
    out = subprocess.run([OBCACHE, "tokenize", "--model", model, *args], check=True, capture_output=True,
                         text=True).stdout
    return [int(x) for x in out.split()]


def expected_ids(reference, meta, text):
    ids = reference.encode(text, add_special_tokens=False).ids
    return ([meta["bos"]] if meta["add_bos"] else []) + ids


def compare_corpus(label, model, reference, meta, lines, corpus):
    got = obcache_lines(model, CORPUS)
    want = [expected_ids(reference, meta, line) for line in lines]
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    check(f"{label}: ids of each of the {len(lines)} corpus lines", len(got) == len(want) and not bad,
          f"{len(bad)} lines differ" + (f", first line {bad[0] + 1}: {lines[bad[0]]!r}\n  obcache   {got[bad[0]]}"
                                        f"\n  reference {want[bad[0]]}" if bad else ""))
    whole = obcache_ids(model, "--file", CORPUS)
    want_whole = expected_ids(reference, meta, corpus)
    first = next((i for i, (g, w) in enumerate(zip(whole, want_whole)) if g != w), None)
    check(f"{label}: ids of the whole corpus ({len(want_whole)} tokens)", whole == want_whole,
          "" if whole == want_whole else f"{len(whole)} vs {len(want_whole)} tokens, first difference at {first}")
    return whole


# Pieces the generated lines are drawn from: the character classes the
# pre-tokenizer regexes tell apart (letters of several scripts and cases,
# digits of several scripts, Unicode spaces and near-spaces, contractions,
# punctuation, combining marks, emoji sequences) and special tokens.
GENERATED_POOL = (
    list("abcXYZ") + list("0123456789") + [" ", "  ", "\t", "\r", "'", "'s", "'LL", "'Re", "'t", "'D"]
    + list(".,;:!?-_()[]{}<>/\\|@#$%^&*+=~`\"") + list("éñüßÆøåçÀÉ") + list("日本語中文한국")
    + ["😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "\u200d", "\u0301", "\u00a0", "\u2003", "\u3000", "\u2028",
       "\u2029", "\u0085", "\u1680", "\u180e", "\u200b", "\u2060", "\u00ad", "\ufeff", "\x0b", "\x0c", "\x1f",
       "\u017f", "\u212a", "\u0130", "\u1e9e", "½", "²", "Ⅻ", "٣", "०", "ǅ", "ʰ", "ª", "µ",
       "<|im_end|>", "<|endoftext|>"])


def generated_lines(count=1000, seed=1234):
    rng = random.Random(seed)
    return ["".join(rng.choice(GENERATED_POOL) for _ in range(rng.randint(1, 40))) for _ in range(count)]


def compare_generated(label, model, reference, meta, lines):
    path = os.path.join(TMP, "tokenizer_generated.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + "\n")
    got = obcache_lines(model, path)
    bad = [i for i, line in enumerate(lines) if got[i] != expected_ids(reference, meta, line)]
    check(f"{label}: ids of {len(lines)} generated lines (seed 1234)", len(got) == len(lines) and not bad,
          f"{len(bad)} differ" + (f", first {lines[bad[0]]!r}" if bad else ""))


def write_metadata_gguf(meta, path, pre):
    """A GGUF holding only the tokenizer metadata, with another pre-tokenizer."""
    writer = gguf.GGUFWriter(path, meta["architecture"])
    writer.add_tokenizer_model(meta["model"])
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(meta["tokens"])
    writer.add_token_types([int(t) for t in meta["token_type"]])
    writer.add_token_merges(meta["merges"])
    writer.add_bos_token_id(int(meta["bos"]))
    writer.add_eos_token_id(int(meta["eos"]))
    writer.add_add_bos_token(meta["add_bos"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_hf_folder(reference, meta, folder, template_file=False):
    """tokenizer.json + tokenizer_config.json; the chat template in the config
    or, as newer checkpoints do, in chat_template.jinja."""
    os.makedirs(folder, exist_ok=True)
    reference.save(os.path.join(folder, "tokenizer.json"))
    config = {"bos_token": meta["tokens"][meta["bos"]], "eos_token": meta["tokens"][meta["eos"]],
              "add_bos_token": meta["add_bos"]}
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.exists(jinja):
        os.remove(jinja)
    if meta["chat_template"] and template_file:
        with open(jinja, "w", encoding="utf-8") as f:
            f.write(meta["chat_template"])
    elif meta["chat_template"]:
        config["chat_template"] = meta["chat_template"]
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)


def merges_as_strings(path):
    """Rewrites model.merges in the older "left right" form."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)


def compare_chat(model, reference, meta, label="GGUF"):
    fast = PreTrainedTokenizerFast(tokenizer_object=reference, bos_token=meta["tokens"][meta["bos"]],
                                   eos_token=meta["tokens"][meta["eos"]])
    fast.chat_template = meta["chat_template"]
    cases = [(None, "What is the capital of France?"),
             ("You are a terse assistant.", "Name three prime numbers  and   a café ☕.")]
    for system, user in cases:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
        text = fast.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        want = reference.encode(text, add_special_tokens=False).ids
        args = ["--chat", user] + (["--system", system] if system else [])
        got = obcache_ids(model, *args)
        check(f"{label}: chat prompt ids, system={'given' if system else 'default'} ({len(want)} tokens)",
              got == want,
              "" if got == want else f"\n  rendered  {text!r}\n  obcache   {got}\n  reference {want}")


def check_show(reference):
    """--show: one token per line, id, tab, its text with \\, newlines and tabs escaped
    (a text whose tokens are all whole characters, so the offsets give each text)."""
    text = "Hello world\n\tcafé \\o/ <|im_end|>"
    out = subprocess.run([OBCACHE, "tokenize", "--model", MODEL, "--show", text], check=True,
                         capture_output=True).stdout.decode("utf-8")
    encoding = reference.encode(text, add_special_tokens=False)

    def escape(piece):
        return piece.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")

    want = "".join(f"{i}\t{escape(text[a:b])}\n" for i, (a, b) in zip(encoding.ids, encoding.offsets))
    check("--show lists id and token text per line", out == want, "" if out == want else f"\n{out}\nvs\n{want}")


def check_bad_input(meta):
    """Unknown pre-tokenizer and invalid UTF-8: one-line error naming the culprit, non-zero exit."""
    path = os.path.join(TMP, "tokenizer_mystery.gguf")
    write_metadata_gguf(meta, path, "mystery-pre")
    run = subprocess.run([OBCACHE, "tokenize", "--model", path, "hello"], capture_output=True, text=True)
    check("unknown pre-tokenizer: error naming the file and the type",
          run.returncode != 0 and path in run.stderr and "mystery-pre" in run.stderr and not run.stdout,
          run.stderr.strip())
    bad = os.path.join(TMP, "tokenizer_bad_utf8.txt")
    with open(bad, "wb") as f:
        f.write(b"fine text \xff\xfe then more")
    run = subprocess.run([OBCACHE, "tokenize", "--model", MODEL, "--file", bad], capture_output=True, text=True)
    check("invalid UTF-8: error naming the file and the byte offset",
          run.returncode != 0 and bad in run.stderr and "byte 10" in run.stderr,
          run.stderr.strip())


def main():
    global TMP
    if not os.path.exists(MODEL):
        sys.exit(f"test_tokenizer_reference: model {MODEL} missing (run scripts/setup.sh)")
    TMP = tempfile.mkdtemp(prefix="tokenizer_reference.", dir=os.environ.get("OBC_TMP", "/tmp"))
    with open(CORPUS, encoding="utf-8", newline="") as f:
        corpus = f.read()
    lines = corpus.split("\n")[:-1]
    meta = read_metadata(MODEL)
    print(f"model {MODEL}: tokenizer {meta['model']}, pre {meta['pre']}, {len(meta['tokens'])} tokens, "
          f"{len(meta['merges'])} merges; corpus {len(lines)} lines, {len(corpus.encode())} bytes")
    reference = build_reference(meta)

    fallback = build_reference(meta, fix_smollm=False)
    n_fallback = sum(fallback.encode(line, add_special_tokens=False).ids !=
                     reference.encode(line, add_special_tokens=False).ids for line in lines)
    print(f"info: transformers' GPT-2 fallback for 'smollm' would differ on {n_fallback} corpus lines")

    whole = compare_corpus("GGUF " + meta["pre"], MODEL, reference, meta, lines, corpus)
    generated = generated_lines()
    compare_generated("GGUF " + meta["pre"], MODEL, reference, meta, generated)
    decoded = subprocess.run([OBCACHE, "tokenize", "--model", MODEL, "--ids", ",".join(map(str, whole))],
                             check=True, capture_output=True).stdout.decode("utf-8")
    check("decode(encode(corpus)) == corpus (obcache)", decoded == corpus)
    check("decode(encode(corpus)) == corpus (reference)",
          reference.decode(reference.encode(corpus, add_special_tokens=False).ids, skip_special_tokens=False) == corpus)

    folder = os.path.join(TMP, "tokenizer_hf")
    write_hf_folder(reference, meta, folder)
    compare_corpus("tokenizer.json (merges as pairs)", folder, reference, meta, lines, corpus)
    merges_as_strings(os.path.join(folder, "tokenizer.json"))
    compare_corpus("tokenizer.json (merges as strings)", folder, reference, meta, lines, corpus)

    for pre in ("llama-bpe", "qwen2"):
        variant = dict(meta, pre=pre)
        path = os.path.join(TMP, f"tokenizer_{pre}.gguf")
        write_metadata_gguf(variant, path, pre)
        variant_reference = build_reference(variant)
        compare_corpus(f"GGUF {pre}", path, variant_reference, variant, lines, corpus)
        compare_generated(f"GGUF {pre}", path, variant_reference, variant, generated)
        folder = os.path.join(TMP, f"tokenizer_hf_{pre}")
        write_hf_folder(variant_reference, variant, folder, template_file=True)
        compare_corpus(f"tokenizer.json with {pre}'s Split regex", folder, variant_reference, variant, lines,
                       corpus)
        if meta["chat_template"]:
            compare_chat(folder, variant_reference, variant, f"tokenizer.json {pre} + chat_template.jinja")

    if meta["chat_template"]:
        compare_chat(MODEL, reference, meta)
    check_show(reference)
    check_bad_input(meta)
    if failures:
        print(f"{len(failures)} check(s) failed: {', '.join(failures)}; scratch folder kept: {TMP}")
        return 1
    shutil.rmtree(TMP)
    print("all tokenizer reference checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
