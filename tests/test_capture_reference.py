#!/usr/bin/env python3
"""The prompt of an `obcache capture` trace against an independent tokenizer:
the one `transformers` builds from the default model's GGUF metadata (set up as
in test_tokenizer_reference.py), with the GGUF's chat template rendered by
transformers (Jinja).

Checked on a short capture of SmolLM2 with the King James haystack:
  1. the trace's prompt ids are exactly what the reference gives for the chat
     of the user text (rendered by transformers) followed by the answer prefix,
     i.e. building the prompt segment by segment changed no token;
  2. each span, decoded by the reference, is the needle sentence, its 7-digit
     value, the question about the needle's key and the answer prefix;
  3. needle_found agrees with the generated text.
Exits non-zero on any difference."""
import os
import re
import subprocess
import sys

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_cache  # noqa: E402
import test_tokenizer_reference as tokref  # noqa: E402  (reference tokenizer set-up)
from transformers import PreTrainedTokenizerFast  # noqa: E402

OBCACHE = os.environ["OBCACHE"]
MODEL = os.environ["OBC_MODEL"]
TMP = os.environ.get("OBC_TMP", "/tmp")
failures = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        failures.append(name)


def text(value):
    """A trace text: uint8 bytes (schema 2), or a bytes/str scalar (schema 1)."""
    if hasattr(value, "tobytes") and getattr(value, "dtype", None) == "uint8":
        return value.tobytes().decode()
    return value.decode() if isinstance(value, bytes) else str(value)


def main():
    if not os.path.exists(MODEL):
        print(f"SKIP: no model at {MODEL}")
        return 0
    path = os.path.join(TMP, "capture_reference.h5")
    subprocess.run([OBCACHE, "capture", "--length", "240", "--depth", "40", "--haystack", "kjv",
                    "--seed", "5", "--decode", "12", "--rows", "8", "-o", path],
                   check=True, stdout=subprocess.DEVNULL)
    with h5py.File(path, "r") as f:
        n_prompt = int(f.attrs["n_prompt"])
        tokens = [int(t) for t in f["tokens"][()]]
        prompt = tokens[:n_prompt]
        prompt_text = text(f["prompt_text"][()])
        generated = text(f["generated_text"][()]) if "generated_text" in f else ""
        found = int(f.attrs["needle_found"])
        spans = {name: tuple(int(x) for x in f["spans"][name][()]) for name in f["spans"]}
    # The GGUF's tokenizer metadata, read once per run (tests/reference_cache.py).
    meta = reference_cache.cached(
        "tokenizer_metadata", [reference_cache.content(tokref.__file__), reference_cache.content(MODEL)],
        lambda: tokref.read_metadata(MODEL))
    reference = tokref.build_reference(meta)
    fast = PreTrainedTokenizerFast(tokenizer_object=reference, bos_token=meta["tokens"][meta["bos"]],
                                   eos_token=meta["tokens"][meta["eos"]])
    fast.chat_template = meta["chat_template"]

    decode = lambda span: reference.decode(prompt[span[0]:span[1]], skip_special_tokens=False)
    answer_prefix = decode(spans["answer_prefix"])
    user = re.search(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", prompt_text, re.S)
    check("the user turn is found in the prompt text", user is not None)
    if user is None:
        return 1
    rendered = fast.apply_chat_template([{"role": "user", "content": user.group(1)}], tokenize=False,
                                        add_generation_prompt=True)
    want = reference.encode(rendered + answer_prefix, add_special_tokens=False).ids
    first = next((i for i, (a, b) in enumerate(zip(want, prompt)) if a != b), None)
    check(f"prompt ids == reference chat ids + answer prefix ({len(prompt)} tokens)", want == prompt,
          "" if want == prompt else f"first difference at {first}, lengths {len(want)} / {len(prompt)}")

    needle = decode(spans["needle"]).strip()
    m = re.fullmatch(r"One of the special magic numbers for (\S+) is: (\d{7})\.", needle)
    check("needle span decodes to RULER's needle sentence", m is not None, repr(needle))
    if m:
        key, value = m.groups()
        check("value span decodes to the needle's value", decode(spans["needle_value"]).strip() == value,
              repr(decode(spans["needle_value"])))
        question = f"What is the special magic number for {key} mentioned in the provided text?"
        check("question span decodes to the question", decode(spans["question"]).strip() == question,
              repr(decode(spans["question"])))
        check("answer prefix names the key",
              answer_prefix.strip() == f"The special magic number for {key} mentioned in the provided text is",
              repr(answer_prefix))
        check(f"needle_found ({found}) agrees with the answer {generated!r}", found == int(value in generated))
    os.unlink(path)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all capture reference checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
