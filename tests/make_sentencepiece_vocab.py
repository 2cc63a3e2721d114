#!/usr/bin/env python3
"""A SentencePiece-style BPE vocabulary for tests, trained with the `tokenizers`
library on generated English-like sentences (fixed seed), in Llama 2's layout:
<unk> <s> </s>, the 256 byte-fallback tokens <0x00>..<0xFF>, then the BPE
tokens (none across a space), spaces spelled U+2581. Written as a metadata-only GGUF
(tokenizer.ggml.model "llama", scores = -rank of the merge that makes each
token, 0 for the others; token types unknown/control/byte/normal), which
tests/make_random_gguf.py can give to a random-weight model.

usage: make_sentencepiece_vocab.py OUT.gguf [--size N]   (default 1000 tokens)
"""
import argparse
import json
import random

import gguf
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

SPACE = "\u2581"
SPECIALS = ["<unk>", "<s>", "</s>"]
BYTES = [f"<0x{b:02X}>" for b in range(256)]

WORDS = ("the of and to in is was for on that with as by at from it his an were are which this "
         "be or has had not but first one their its new after who they have her she two been "
         "other when there all during into school time may years more most only over city some "
         "world would where later up such used many can state about national out known "
         "university united then made needle haystack secret number value key café naïve résumé "
         "déjà vu über straße").split()


def corpus(rng, n):
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def train_vocab(rng, size=500, words=False):
    """(tokens, merges): the Llama 2 layout above, merges as (left, right).
    With words, no token spans a space (as SentencePiece trains by default);
    else tokens may run across words, which tests merging harder."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    if words:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(SPACE, prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(vocab_size=size, show_progress=False, limit_alphabet=60)
    tok.train_from_iterator(corpus(rng, 600), trainer)
    trained = json.loads(tok.to_str())["model"]
    order = sorted(trained["vocab"].items(), key=lambda kv: kv[1])
    tokens = SPECIALS + BYTES + [t for t, _ in order if t not in SPECIALS and t not in BYTES]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    return tokens, merges


def merge_scores(tokens, merges):
    """Score -1 - rank for the token the merge of that rank makes, 0 otherwise."""
    vocab = {t: i for i, t in enumerate(tokens)}
    scores = [0.0] * len(tokens)
    for rank, (left, right) in enumerate(merges):
        if left + right in vocab and scores[vocab[left + right]] == 0.0:
            scores[vocab[left + right]] = -1.0 - rank
    return scores


def token_types(tokens):
    return [2, 3, 3] + [6] * 256 + [1] * (len(tokens) - 259)


def write_gguf(path, tokens, scores, types, add_bos=False):
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(add_bos)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--size", type=int, default=1000)
    args = parser.parse_args()
    tokens, merges = train_vocab(random.Random(39), args.size, words=True)
    write_gguf(args.out, tokens, merge_scores(tokens, merges), token_types(tokens), add_bos=True)


if __name__ == "__main__":
    main()
