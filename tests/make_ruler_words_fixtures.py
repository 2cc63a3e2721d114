#!/usr/bin/env python3
"""Fixtures of tests/test_ruler_words_reference.py: one sample of each of
RULER's vt, cwe and fwe texts (prompts/ruler_words.h) as printed by
tests/ruler_words_dump, in tests/data/ruler/{vt,cwe,fwe}-text.json, drawn
from the word list tests/data/ruler/words.txt so that they do not depend on
the system's dictionary.

With --words-from DICT (a word list such as /usr/share/dict/words), first
rewrites words.txt: every 50th of DICT's words of 3-12 lowercase letters,
sorted and distinct (prompts/ruler_sources.c's filter).

usage: make_ruler_words_fixtures.py DUMP [--words-from DICT]
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "ruler")
WORDS = os.path.join(DATA, "words.txt")
WORDS_STRIDE = 50
# task -> (length, seed, size) of its fixture
FIXTURES = {"vt": (4096, 42, 20), "cwe": (4096, 42, 30), "fwe": (4096, 42, 400)}


def dump_args(dump, task, length, seed, size):
    return [dump, "--task", task, "--length", str(length), "--seed", str(seed),
            "--size", str(size), "--words", WORDS]


def write_words(source):
    with open(source, encoding="utf-8", errors="replace") as f:
        words = sorted({w for w in f.read().split("\n") if re.fullmatch(r"[a-z]{3,12}", w)})
    with open(WORDS, "w") as f:
        f.write("".join(w + "\n" for w in words[::WORDS_STRIDE]))


def main():
    args = sys.argv[1:]
    if len(args) not in (1, 3) or (len(args) == 3 and args[1] != "--words-from"):
        sys.exit(__doc__.strip().splitlines()[-1])
    if len(args) == 3:
        write_words(args[2])
    for task, (length, seed, size) in FIXTURES.items():
        text = subprocess.run(dump_args(args[0], task, length, seed, size), check=True,
                              capture_output=True).stdout
        with open(os.path.join(DATA, f"{task}-text.json"), "wb") as f:
            f.write(text)


if __name__ == "__main__":
    main()
