#!/usr/bin/env python3
"""obcache's tokenizer.json normalizers against the `tokenizers` library.

For each normalizer (NFC, NFD, NFKC, NFKD, Lowercase, Strip, Prepend, Replace,
Sequences of them, the empty Sequence) the test writes a tokenizer.json whose
model is a byte-level BPE without merges (one token per byte), so that the ids
spell the normalized text byte by byte. `obcache tokenize --lines` must give
the ids `tokenizers` gives, on hand-picked lines (ASCII, accents, combining
marks in non-canonical order, a long run of marks, CJK, compatibility
characters, Hangul syllables and jamo, emoji, Greek, Turkish dotted I, Unicode
spaces) and on 300 random lines drawn from those ranges (fixed seed). Also: a
Replace with a Regex pattern and an unknown normalizer are refused in one line.
Exits non-zero on any difference."""
import os
import random
import shutil
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer, models, normalizers as N, pre_tokenizers

OBCACHE = os.environ["OBCACHE"]

LINES = [
    "Hello world! The needle is 42.",
    "café naïve résumé Ångström",
    "e\u0301 a\u0323\u0302 a\u0302\u0323 e\u0301\u0327 \u1e9b\u0323 o\u031b\u0303\u0323",
    "x" + "".join(chr(c) for c in [0x301, 0x316, 0x300, 0x323, 0x327, 0x302] * 7) + "y",
    "漢字とカタカナ、中文测试",
    "\ufb01 \u2460 \uff21\uff22\uff23 \uff76\uff80\uff76\uff85 \u338f \u2126 \u212b \u00bd \u2075",
    "한국어 \u1100\u1161\u11a8 \u1112\u1161\u11ab \uac00\u11a8",
    "emoji 😀👍🏽👨‍👩‍👧 🇫🇷",
    "ΣΑΣ Ὀδυσσεύς İstanbul ǅ",
    "  spaces\u00a0and\u3000others\u2003  ",
    "Tiếng Việt có dấu \u0344 \u0f73",
]

RANGES = [(0x20, 0x7E), (0xA0, 0x17F), (0x300, 0x36F), (0x1100, 0x1112), (0x1161, 0x1175),
          (0x11A8, 0x11C2), (0xAC00, 0xAC40), (0xFB00, 0xFB06), (0xFF01, 0xFF5E), (0x2460, 0x2473),
          (0x1F600, 0x1F64F), (0x4E00, 0x4E40), (0x1E00, 0x1EFF), (0x3300, 0x3357)]

NORMALIZERS = {
    "NFC": N.NFC(), "NFD": N.NFD(), "NFKC": N.NFKC(), "NFKD": N.NFKD(), "Lowercase": N.Lowercase(),
    "Strip": N.Strip(), "Strip right": N.Strip(left=False), "Prepend": N.Prepend("\u2581"),
    "Replace": N.Replace(" ", "\u2581"), "empty Sequence": N.Sequence([]),
    "Llama 2": N.Sequence([N.Prepend("\u2581"), N.Replace(" ", "\u2581")]),
    "NFKC, Lowercase, Strip": N.Sequence([N.NFKC(), N.Lowercase(), N.Sequence([N.Strip()])]),
}

failures = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        failures.append(name)


def byte_tokenizer(normalizer):
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.normalizer = normalizer
    return tok


def obcache_lines(folder, text_path):
    out = subprocess.run([OBCACHE, "tokenize", "--model", folder, "--lines", "--file", text_path],
                         capture_output=True, text=True)
    if out.returncode:
        return None, out.stderr.strip()
    return [[int(x) for x in line.split()] for line in out.stdout.split("\n")[:-1]], ""


def main():
    rng = random.Random(39)
    lines = list(LINES)
    for _ in range(300):
        lines.append("".join(chr(rng.randint(*rng.choice(RANGES))) for _ in range(rng.randint(1, 24))))
    tmp = tempfile.mkdtemp(prefix="normalizer_reference.", dir=os.environ.get("OBC_TMP"))
    text_path = os.path.join(tmp, "lines.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    for name, normalizer in NORMALIZERS.items():
        folder = os.path.join(tmp, name.replace(" ", "_").replace(",", ""))
        os.makedirs(folder)
        tok = byte_tokenizer(normalizer)
        tok.save(os.path.join(folder, "tokenizer.json"))
        got, err = obcache_lines(folder, text_path)
        if got is None:
            check(f"{name}: obcache tokenize runs", False, err)
            continue
        bad = [i for i, line in enumerate(lines) if i >= len(got) or got[i] != tok.encode(line).ids]
        detail = ""
        if bad:
            i = bad[0]
            detail = (f"{len(bad)} of {len(lines)} lines differ, first {lines[i]!r}: expected "
                      f"{normalizer.normalize_str(lines[i])!r}")
        check(f"{name}: the ids of {len(lines)} lines equal the reference's", not bad, detail)

    for name, normalizer, expected in [
            ("a Regex Replace", N.Replace(__import__("tokenizers").Regex(" +"), " "), "Regex"),
            ("an unknown normalizer", N.BertNormalizer(), "BertNormalizer")]:
        folder = os.path.join(tmp, "refused")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        byte_tokenizer(normalizer).save(os.path.join(folder, "tokenizer.json"))
        got, err = obcache_lines(folder, text_path)
        check(f"{name} is refused in one line naming the file and it",
              got is None and "\n" not in err and "tokenizer.json" in err and expected in err, err)
    if failures:
        print(f"{len(failures)} check(s) failed; files kept in {tmp}")
        sys.exit(1)
    shutil.rmtree(tmp)
    print("all checks passed")


if __name__ == "__main__":
    main()
