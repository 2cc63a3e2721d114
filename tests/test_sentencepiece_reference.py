#!/usr/bin/env python3
"""obcache's SentencePiece-style tokenizers against independent references,
on vocabularies this test trains (fixed seed):

  1. a BPE with byte fallback trained by the `tokenizers` library, written as
     tokenizer.json three ways: Llama 2 (normalizers Prepend("▁") +
     Replace(" ", "▁"), decoder Replace/ByteFallback/Fuse/Strip), Metaspace
     with prepend_scheme "first" and no split (Mistral, TinyLlama), and
     Metaspace "always" with split; obcache's ids must equal `tokenizers`'
     ids and its decoding `tokenizers`' decoding;
  2. the same vocabulary as a GGUF (tokenizer.ggml.model "llama", scores =
     -rank of the merge that makes each token, byte tokens <0xXX>), read as
     llama.cpp's SPM tokenizer reads it: obcache's ids must equal a slow
     Python twin of that algorithm below (and decoding must give the text
     back), and the number of lines where they differ from `tokenizers`' BPE
     is printed (score-ordered merging is not always rank-ordered merging);
  3. if the `sentencepiece` package imports: a SentencePiece BPE model trained
     by it (identity normalization, byte fallback), written as a GGUF with its
     pieces, scores and types; obcache's ids must equal `sentencepiece`'s;
     and, if `transformers` and `protobuf` import, the tokenizer.json that
     transformers' LlamaTokenizer writes for that model (legacy and not), with
     BOS, against `tokenizers`.

Texts: ASCII, accented, combining marks, CJK, emoji, byte fallback (characters
the vocabulary lacks), control characters, runs of spaces, and special tokens
inside the text. Exits non-zero on any difference."""
import os
import random
import shutil
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

from make_sentencepiece_vocab import (BYTES, SPACE, SPECIALS, corpus, merge_scores, token_types,
                                      train_vocab, write_gguf)

OBCACHE = os.environ["OBCACHE"]
LINES = [
    "Hello world! The needle is 42.",
    "the school of the city was known for its university",
    " leading space and  two  spaces and trailing ",
    "café naïve résumé Ångström déjà vu",
    "e\u0301 a\u0323\u0302 combining marks",
    "漢字とカタカナ、中文测试",
    "emoji 😀👍🏽👨‍👩‍👧 🇫🇷",
    "tabs\tand\rcontrols\x01\x7f",
    "<s>special</s> tokens <unk> inside",
    "ÿ þ ß ø unknown letters ŋ ʃ",
    "",
]

failures = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        failures.append(name)


def hf_tokenizer(tokens, merges, style):
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>"))
    if style == "llama2":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
        tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    else:
        scheme, split = ("first", False) if style == "metaspace-first" else ("always", True)
        tok.pre_tokenizer = pre_tokenizers.Metaspace(SPACE, prepend_scheme=scheme, split=split)
        tok.decoder = decoders.Sequence([decoders.Metaspace(SPACE, prepend_scheme=scheme, split=split),
                                         decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens(SPECIALS)
    return tok


def spm_twin(text, vocab, scores, specials):
    """llama.cpp's SPM tokenizer, slowly: specials (control and unknown
    tokens) split out, " " before each
    stretch, spaces as U+2581, then merge the adjacent pair whose concatenation
    is a token of the highest score (leftmost on ties); a character that is
    no token becomes its byte tokens."""
    out, i, stretch = [], 0, ""
    pieces = []
    while i < len(text):
        hit = next((s for s in sorted(specials, key=len, reverse=True) if text.startswith(s, i)), None)
        if hit:
            pieces += [("text", stretch), ("special", hit)]
            stretch, i = "", i + len(hit)
        else:
            stretch += text[i]
            i += 1
    pieces.append(("text", stretch))
    for kind, piece in pieces:
        if kind == "special":
            out.append(vocab[piece])
            continue
        if not piece:
            continue
        symbols = list((" " + piece).replace(" ", SPACE))
        while True:
            best = None
            for k in range(len(symbols) - 1):
                joined = symbols[k] + symbols[k + 1]
                if joined in vocab and (best is None or scores[vocab[joined]] > scores[vocab[best[1]]]):
                    best = (k, joined)
            if best is None:
                break
            symbols[best[0]:best[0] + 2] = [best[1]]
        for s in symbols:
            if s in vocab:
                out.append(vocab[s])
            else:
                out += [vocab[f"<0x{b:02X}>"] for b in s.encode("utf-8")]
    return out


def spm_decode(ids, tokens):
    """llama.cpp's detokenizer: byte tokens as bytes, U+2581 as a space, special
    tokens as their text, one leading space of the first token dropped."""
    out = b""
    for k, i in enumerate(ids):
        t = tokens[i]
        piece = bytes([int(t[3:5], 16)]) if t in BYTES else t.replace(SPACE, " ").encode("utf-8")
        if k == 0 and piece.startswith(b" "):
            piece = piece[1:]
        out += piece
    return out.decode("utf-8", "replace")


def obcache_ids(model, text_path):
    run = subprocess.run([OBCACHE, "tokenize", "--model", model, "--lines", "--file", text_path],
                         capture_output=True, text=True)
    if run.returncode:
        return None, run.stderr.strip()
    return [[int(x) for x in line.split()] for line in run.stdout.split("\n")[:-1]], ""


def obcache_decode(model, ids):
    if not ids:
        return ""
    run = subprocess.run([OBCACHE, "tokenize", "--model", model, "--ids", ",".join(map(str, ids))],
                         capture_output=True)
    return run.stdout.decode("utf-8", "replace") if run.returncode == 0 else None


def compare(name, model, lines, text_path, expected, reference_decode=None):
    got, err = obcache_ids(model, text_path)
    if got is None:
        check(f"{name}: obcache tokenize runs", False, err)
        return
    # --lines skips an empty last line; pad so indices line up.
    got += [[]] * (len(lines) - len(got))
    bad = [i for i in range(len(lines)) if got[i] != expected[i]]
    detail = f"first {lines[bad[0]]!r}: got {got[bad[0]]}, expected {expected[bad[0]]}" if bad else ""
    check(f"{name}: ids of {len(lines)} lines equal the reference's", not bad, detail)
    sample = [i for i in range(len(lines)) if i < len(LINES)] + list(range(len(LINES), len(lines), 25))
    wrong = []
    for i in sample:
        want = reference_decode(expected[i]) if reference_decode else lines[i]
        if obcache_decode(model, expected[i]) != want:
            wrong.append(i)
    detail = ""
    if wrong:
        i = wrong[0]
        want = reference_decode(expected[i]) if reference_decode else lines[i]
        detail = f"first {lines[i]!r}: got {obcache_decode(model, expected[i])!r}, expected {want!r}"
    check(f"{name}: decoding {len(sample)} lines gives the reference's text", not wrong, detail)


def sentencepiece_case(tmp, rng, lines, text_path):
    try:
        import sentencepiece as spm
    except ImportError:
        print("SKIP (sentencepiece): the sentencepiece package does not import "
              "(scripts/setup.sh --tests installs it)")
        return
    train_path = os.path.join(tmp, "sp_train.txt")
    with open(train_path, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus(rng, 800)) + "\n")
    prefix = os.path.join(tmp, "sp")
    spm.SentencePieceTrainer.train(
        input=train_path, model_prefix=prefix, model_type="bpe", vocab_size=400, byte_fallback=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
        character_coverage=1.0, split_digits=False, minloglevel=2, num_threads=1)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 1)
    path = os.path.join(tmp, "sp.gguf")
    write_gguf(path, tokens, scores, types)
    # sentencepiece knows nothing of special tokens in the text: leave those lines out.
    plain = [line for line in lines if "<s>" not in line and "</s>" not in line and "<unk>" not in line]
    plain_path = os.path.join(tmp, "sp_lines.txt")
    with open(plain_path, "w", encoding="utf-8") as f:
        f.write("\n".join(plain) + "\n")
    compare("sentencepiece BPE as GGUF", path, plain, plain_path, [sp.encode(l) for l in plain],
            lambda ids: sp.decode(ids))
    transformers_case(tmp, prefix + ".model", lines, text_path)


def transformers_case(tmp, model_file, lines, text_path):
    """The tokenizer.json that transformers writes for that SentencePiece model
    (LlamaTokenizer, legacy and not: Metaspace prepend_scheme always / first,
    the Replace/ByteFallback/Fuse/Strip decoder, BOS by the post-processor)."""
    try:
        import google.protobuf  # noqa: F401 (transformers reads the model through it)
        from transformers import LlamaTokenizer
    except ImportError as error:
        print(f"SKIP (transformers' Llama tokenizer.json): {error}")
        return
    source = os.path.join(tmp, "llama_source")
    os.makedirs(source)
    shutil.copy(model_file, os.path.join(source, "tokenizer.model"))
    for legacy in (True, False):
        folder = os.path.join(tmp, f"llama_legacy_{legacy}")
        LlamaTokenizer.from_pretrained(source, legacy=legacy).save_pretrained(folder)
        tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        compare(f"transformers' Llama tokenizer.json (legacy={legacy})", folder, lines, text_path,
                [tok.encode(l).ids for l in lines],
                lambda ids, tok=tok: tok.decode(ids, skip_special_tokens=False))


def main():
    rng = random.Random(39)
    tmp = tempfile.mkdtemp(prefix="sentencepiece_reference.", dir=os.environ.get("OBC_TMP"))
    tokens, merges = train_vocab(rng)
    lines = LINES + corpus(rng, 150)
    alphabet = "abcdefghijklmnopqrstuvwxyz  éèüßøæœ漢字😀\u0301"
    lines += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(150)]
    text_path = os.path.join(tmp, "lines.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")

    for style in ["llama2", "metaspace-first", "metaspace-always"]:
        tok = hf_tokenizer(tokens, merges, style)
        folder = os.path.join(tmp, style)
        os.makedirs(folder)
        tok.save(os.path.join(folder, "tokenizer.json"))
        compare(f"tokenizer.json ({style})", folder, lines, text_path,
                [tok.encode(l, add_special_tokens=False).ids for l in lines],
                lambda ids, tok=tok: tok.decode(ids, skip_special_tokens=False))

    # The merge that makes a token ranks it: score -rank; base tokens score 0 and never merge.
    vocab = {t: i for i, t in enumerate(tokens)}
    scores = merge_scores(tokens, merges)
    path = os.path.join(tmp, "spm.gguf")
    write_gguf(path, tokens, scores, token_types(tokens))
    twin = [spm_twin(l, vocab, scores, SPECIALS) for l in lines]
    compare("GGUF tokenizer.ggml.model llama", path, lines, text_path, twin,
            lambda ids: spm_decode(ids, tokens))
    bpe = hf_tokenizer(tokens, merges, "llama2")
    differ = sum(bpe.encode(l, add_special_tokens=False).ids != t for l, t in zip(lines, twin))
    print(f"note: the SPM twin and tokenizers' BPE differ on {differ} of {len(lines)} lines")

    sentencepiece_case(tmp, rng, lines, text_path)
    if failures:
        print(f"{len(failures)} check(s) failed; files kept in {tmp}")
        sys.exit(1)
    shutil.rmtree(tmp)
    print("all checks passed")


if __name__ == "__main__":
    main()
