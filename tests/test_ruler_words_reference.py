#!/usr/bin/env python3
"""Independent reference for RULER's vt, cwe and fwe texts
(prompts/ruler_words.h), written from NVIDIA RULER's
scripts/data/synthetic/{variable_tracking,common_words_extraction,
freq_words_extraction}.py and constants.py, not from the C code.

For samples printed by tests/ruler_words_dump ($OBC_RULER_WORDS_DUMP) it
re-derives the answers from the context alone with RULER's definitions
(follow the chain of assignments from the value; count the words) and
checks that before + context + after and the answer prefix are RULER's
template, retyped here, around that context: for vt with RULER's ICL example
(whose own answer is re-derived the same way) before it, for cwe with its
few-shot example. It also checks that the dump still prints, byte for byte,
the fixtures tests/data/ruler/{vt,cwe,fwe}-text.json that
tests/make_ruler_words_fixtures.py wrote. Exits non-zero on any failure."""
import collections
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_ruler_words_fixtures import FIXTURES, WORDS, dump_args  # noqa: E402

DUMP = os.environ.get("OBC_RULER_WORDS_DUMP", "build/tests/ruler_words_dump")
SYSTEM_WORDS = "/usr/share/dict/words"

# RULER's scripts/data/synthetic/constants.py, retyped.
VT_TEMPLATE = ("Memorize and track the chain(s) of variable assignment hidden in the following "
               "text.\n\n{context}\nQuestion: Find all variables that are assigned the value "
               "{query} in the text above.")
VT_ANSWER_PREFIX = (" Answer: According to the chain(s) of variable assignment in the text above, "
                    "{num_v} variables are assigned the value {query}, they are: ")
CWE_TEMPLATE = ("Below is a numbered list of words. In these words, some appear more often than "
                "others. Memorize the ones that appear most often.\n{context}\nQuestion: What are "
                "the 10 most common words in the above list?")
CWE_ANSWER_PREFIX = " Answer: The top 10 words that appear most often in the list are:"
FWE_TEMPLATE = ("Read the following coded text and track the frequency of each coded word. Find "
                "the three most frequently appeared coded words. {context}\nQuestion: Do not "
                "provide any explanation. Please ignore the dots '....'. What are the three most "
                "frequently appeared words in the above coded text?")
FWE_ANSWER_PREFIX = (" Answer: According to the coded text above, the three most frequently "
                     "appeared words are:")
# variable_tracking.py's noise haystack; synthetic.yaml's vt, cwe and fwe arguments.
VT_NOISE = ("The grass is green. The sky is blue. The sun is yellow. Here we go. There and back "
            "again.")
VT_HOPS = 4
CWE_NUM_CW = 10
FWE_ALPHA = 2.0
FWE_TOKENS_TO_GENERATE = 50

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def dump(task, length, seed, size, words):
    args = dump_args(DUMP, task, length, seed, size)
    args[-1] = words
    return json.loads(subprocess.run(args, check=True, capture_output=True).stdout)


# ---- vt ----

def vt_follow(context):
    """RULER's answer from the text: the value assigned first, then every
    variable assigned a variable that holds it, in order of assignment."""
    value, holders = None, []
    for line in context.split("\n"):
        if line == VT_NOISE:
            continue
        m = re.fullmatch(r"VAR ([A-Z]+) = (\d+)", line)
        if m:
            assert value is None, "two value assignments"
            value, holders = m.group(2), [m.group(1)]
            continue
        m = re.fullmatch(r"VAR ([A-Z]+) = VAR ([A-Z]+) ", line)
        assert m, f"neither noise nor assignment: {line!r}"
        if m.group(2) in holders:
            holders.append(m.group(1))
    return value, holders


def check_vt(s, where):
    value, names = vt_follow(s["context"])
    check(names == s["answers"], f"{where}: chain {names} != answers {s['answers']}")
    check(len(names) == VT_HOPS + 1 and len(set(names)) == len(names)
          and all(len(n) == 5 for n in names), f"{where}: five distinct 5-letter names")
    check(10000 <= int(value) <= 99998, f"{where}: value {value} in np.random.randint(10000, 99999)")
    lines = s["context"].split("\n")
    check(lines.count(VT_NOISE) == s["size"] and len(lines) == s["size"] + VT_HOPS + 1,
          f"{where}: {s['size']} noise paragraphs and five assignments")
    check(". \n" not in s["context"], f"{where}: RULER's '. \\n' -> '.\\n' leaves nothing")
    for j, mark in enumerate(s["marks"]):
        text = s["context"][mark["begin"]:mark["end"]]
        expected = (f"VAR {names[0]} = {value}" if j == 0 else f"VAR {names[j]} = VAR {names[j - 1]}")
        check(mark["name"] == f"chain_{j + 1}" and text == expected, f"{where}: mark {mark}")
    check(len(s["marks"]) == VT_HOPS + 1, f"{where}: five marks")
    # RULER: icl_example + "\n" + the task's template, then its answer prefix.
    head = VT_TEMPLATE[:VT_TEMPLATE.index("{context}")]
    check(s["before"].endswith("\n" + head), f"{where}: the task's instruction ends before")
    icl = s["before"][:len(s["before"]) - len(head) - 1]
    whole = icl + "\n" + VT_TEMPLATE.format(context=s["context"], query=value)
    check(s["before"] + s["context"] + s["after"] == whole, f"{where}: RULER's template")
    check(" " + s["answer_prefix"] == VT_ANSWER_PREFIX.format(num_v=VT_HOPS + 1, query=value),
          f"{where}: RULER's answer prefix")
    # The ICL example: RULER's template and answer prefix (no model template)
    # around a 3-letter chain, " " + its answer + "\n".
    m = re.fullmatch(re.escape(head) + r"(.*)\nQuestion: .*", icl, re.S)
    check(m is not None, f"{where}: the ICL example opens with the template")
    if m:
        icl_context = m.group(1)
        icl_value, icl_names = vt_follow(icl_context)
        expected = (VT_TEMPLATE.format(context=icl_context, query=icl_value)
                    + VT_ANSWER_PREFIX.format(num_v=VT_HOPS + 1, query=icl_value)
                    + " " + " ".join(icl_names) + "\n")
        check(icl == expected, f"{where}: the ICL example is RULER's with its answer")
        check(len(icl_names) == VT_HOPS + 1 and all(len(n) == 3 for n in icl_names),
              f"{where}: the ICL chain has five 3-letter names")
        check(icl_context.count(VT_NOISE) > 0, f"{where}: the ICL example has noise")


# ---- cwe ----

def cwe_parse(numbered):
    parts = numbered.split(" ")
    check(len(parts) % 2 == 0, "cwe list: number-word pairs")
    numbers, words = parts[0::2], parts[1::2]
    check(numbers == [f"{i + 1}." for i in range(len(words))], "cwe list: numbered 1, 2, ...")
    return words


def cwe_shape(length):
    """common_words_extraction.py: (distinct, common, uncommon) repeats of the
    few-shot example, then the task's (common, uncommon)."""
    if length < 4096:
        return (20, 3, 1), (6, 1)
    return (40, 10, 3), (30, 3)


def cwe_common(words, common_repeats, uncommon_repeats, where):
    counts = collections.Counter(words)
    common = sorted(w for w, c in counts.items() if c == common_repeats)
    check(len(common) == CWE_NUM_CW, f"{where}: {CWE_NUM_CW} words repeated {common_repeats}x")
    check(all(c in (common_repeats, uncommon_repeats) for c in counts.values()),
          f"{where}: others repeated {uncommon_repeats}x")
    return common, len(counts)


def check_cwe(s, where):
    (ex_distinct, ex_common, ex_uncommon), (common_repeats, uncommon_repeats) = cwe_shape(
        s["length"])
    common, distinct = cwe_common(cwe_parse(s["context"]), common_repeats, uncommon_repeats, where)
    check(common == sorted(s["answers"]), f"{where}: answers are the most common words")
    check(distinct == s["size"], f"{where}: {s['size']} distinct words")
    head = CWE_TEMPLATE[:CWE_TEMPLATE.index("{context}")]
    check(s["before"].endswith("\n" + head), f"{where}: the task's instruction ends before")
    example = s["before"][:len(s["before"]) - len(head) - 1]
    whole = example + "\n" + CWE_TEMPLATE.format(context=s["context"])
    check(s["before"] + s["context"] + s["after"] == whole, f"{where}: RULER's template")
    check(" " + s["answer_prefix"] == CWE_ANSWER_PREFIX, f"{where}: RULER's answer prefix")
    # The few-shot example: template and answer prefix, " ", its numbered answer.
    m = re.fullmatch(re.escape(head) + r"(.*)\nQuestion: [^\n]*are: (.*)", example, re.S)
    check(m is not None, f"{where}: the few-shot example")
    if m:
        ex_answer = cwe_parse(m.group(2))
        ex_words, ex_found = cwe_parse(m.group(1)), None
        ex_found, ex_n = cwe_common(ex_words, ex_common, ex_uncommon, where + " few-shot")
        check(ex_found == sorted(ex_answer), f"{where}: the few-shot answer is its common words")
        check(ex_n == ex_distinct, f"{where}: the few-shot example has {ex_distinct} words")
        check(example == CWE_TEMPLATE.format(context=m.group(1)) + CWE_ANSWER_PREFIX + " "
              + " ".join(f"{i + 1}. {w}" for i, w in enumerate(ex_answer)),
              f"{where}: the few-shot example is RULER's")


# ---- fwe ----

def check_fwe(s, where):
    words = s["context"].split(" ")
    counts = collections.Counter(words)
    zeta = math.pi ** 2 / 6  # zeta(2)
    vocab_size = (s["length"] - FWE_TOKENS_TO_GENERATE) // 50
    expected = [int(s["size"] * k ** -FWE_ALPHA / zeta) for k in range(1, vocab_size + 1)]
    check(counts["..."] == expected[0], f"{where}: '...' is rank 1")
    others = sorted((c for w, c in counts.items() if w != "..."), reverse=True)
    check(others == [c for c in expected[1:] if c > 0], f"{where}: counts follow the formula")
    check(all(re.fullmatch(r"[a-z]{6}", w) for w in counts if w != "..."),
          f"{where}: 6-letter lowercase codes")
    # The answers are ranks 2, 3, 4; every other code is at most as frequent,
    # less when rank 5 is (then they are the three most frequent codes).
    check([counts[a] for a in s["answers"]] == expected[1:4], f"{where}: answers are ranks 2-4")
    rest = [c for w, c in counts.items() if w != "..." and w not in s["answers"]]
    check(all(c <= expected[3] for c in rest), f"{where}: no other code is more frequent")
    if len(expected) > 4 and expected[3] > expected[4]:
        top = sorted((w for w in counts if w != "..."), key=lambda w: -counts[w])[:3]
        check(top == s["answers"], f"{where}: answers {s['answers']} are the top three {top}")
    check(s["before"] + s["context"] + s["after"] == FWE_TEMPLATE.format(context=s["context"]),
          f"{where}: RULER's template")
    check(" " + s["answer_prefix"] == FWE_ANSWER_PREFIX, f"{where}: RULER's answer prefix")


CHECKS = {"vt": check_vt, "cwe": check_cwe, "fwe": check_fwe}
# task -> (length, size) of the fresh samples, each for several seeds.
SAMPLES = {"vt": [(4096, 5), (4096, 60), (32768, 900)],
           "cwe": [(1024, 10), (2048, 150), (4095, 400), (4096, 11), (16384, 800)],
           "fwe": [(250, 27), (300, 500), (4096, 600), (16384, 3000), (131072, 25000)]}


def main():
    if not os.path.exists(DUMP):
        sys.exit(f"{DUMP}: no ruler_words_dump (build the tree first)")
    for task, (length, seed, size) in FIXTURES.items():
        path = os.path.join(HERE, "data", "ruler", f"{task}-text.json")
        args = dump_args(DUMP, task, length, seed, size)
        printed = subprocess.run(args, check=True, capture_output=True).stdout
        with open(path, "rb") as f:
            check(printed == f.read(), f"{path}: the dump no longer prints the fixture")
        CHECKS[task](json.loads(printed), f"{task} fixture")
    words = SYSTEM_WORDS if os.path.exists(SYSTEM_WORDS) else WORDS
    n = len(FIXTURES)
    for task, cases in SAMPLES.items():
        for length, size in cases:
            for seed in range(3):
                CHECKS[task](dump(task, length, seed, size, words),
                             f"{task} length {length} seed {seed} size {size}")
                n += 1
    if failures:
        sys.exit(f"{len(failures)} failures")
    print(f"ruler_words reference: {n} samples (words from {words}), all checks passed")


if __name__ == "__main__":
    main()
