#!/usr/bin/env python3
"""Independent check of the niah prompts of prompts/ruler_task.c.

For every niah task at a few seeds and lengths, tests/ruler_dump prints one
sample; this script rebuilds RULER's template from the strings of RULER's
scripts/data/synthetic/constants.py and the variables of scripts/synthetic.yaml
(typed again here, no C logic reused), parses the sample's user turn against
it and checks: the singular rewrite, the needles' format and count, the
distractor lines of the "needle" haystack, the query and the answers, that
the reference tokenizer (Hugging Face tokenizers, built from the GGUF as
tests/test_tokenizer_reference.py does) gives the sample's ids for its text
in the chat template (or RULER's base template), that the prompt plus 128
generated tokens fits the length while one more haystack unit does not, and
that every span decodes to its text.
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_tokenizer_reference as tokref  # noqa: E402  (reference tokenizer set-up)
from transformers import PreTrainedTokenizerFast  # noqa: E402

DUMP = os.environ.get("OBC_RULER_DUMP")
MODEL = tokref.MODEL
FAILED = []

# RULER's niah template and answer prefix (constants.py), and the variables
# of synthetic.yaml: haystack, key type, value type, num_needle_k/v/q.
TEMPLATE = ("Some special magic {type_needle_v} are hidden within the following text. Make sure to "
            "memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are "
            "all the special magic {type_needle_v} for {query} mentioned in the provided text?")
ANSWER_PREFIX = " The special magic {type_needle_v} for {query} mentioned in the provided text are"
TASKS = {
    "niah_single_1": ("noise", "words", "numbers", 1, 1, 1),
    "niah_single_2": ("essay", "words", "numbers", 1, 1, 1),
    "niah_single_3": ("essay", "words", "uuids", 1, 1, 1),
    "niah_multikey_1": ("essay", "words", "numbers", 4, 1, 1),
    "niah_multikey_2": ("needle", "words", "numbers", 1, 1, 1),
    "niah_multikey_3": ("needle", "uuids", "uuids", 1, 1, 1),
    "niah_multivalue": ("essay", "words", "numbers", 1, 4, 1),
    "niah_multiquery": ("essay", "words", "numbers", 1, 1, 4),
}
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
PATTERN = {"words": r"[a-z]+-[a-z]+", "numbers": r"[1-9][0-9]{6}",
           "uuids": r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"}
TOKENS_TO_GENERATE = 128


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
    if not ok:
        FAILED.append(name)
    return ok


def dump(task, length, seed, plain=False, space=False):
    args = [DUMP, "--model", MODEL, "--task", task, "--length", str(length), "--seed", str(seed)]
    args += (["--no-chat-template"] if plain else []) + (["--answer-space"] if space else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def ruler_template(task):
    """niah.py's template + answer prefix with the singular rewrite, split like niah.py."""
    _, _, value_type, _, num_v, num_q = TASKS[task]
    template, type_v = TEMPLATE + ANSWER_PREFIX, value_type
    if num_q * num_v == 1:
        for old, new in (("Some", "A"), ("are all", "is"), ("are", "is"), ("answers", "answer")):
            template = template.replace(old, new)
        type_v = type_v[:-1]
    cut = template.rfind(ANSWER_PREFIX[:10])
    return template[:cut], template[cut:], type_v


def parse_user(task, sample, label):
    """(context, query) of the sample's user turn, matched against RULER's template."""
    user_template, answer_template, type_v = ruler_template(task)
    head, tail = user_template.split("{context}")
    regex = "".join(re.escape(part.replace("{type_needle_v}", type_v)) if i % 2 == 0 else "(?P<%s>.*)" % part
                    for i, part in enumerate(re.split(r"\{(query)\}", tail)))
    m = re.fullmatch(re.escape(head.replace("{type_needle_v}", type_v)) + "(?P<context>.*)" + regex,
                     sample["user"], re.S)
    if not check(f"{label}: the user turn is RULER's template", m is not None, sample["user"][:200]):
        return None, None
    query = m.group("query")
    answer = answer_template.replace("{type_needle_v}", type_v).replace("{query}", query)
    check(f"{label}: the answer prefix is RULER's", " " + sample["answer_prefix"] == answer,
          repr(sample["answer_prefix"]))
    return m.group("context"), query


def check_context(task, sample, context, query, label):
    haystack, key_type, value_type, num_k, num_v, num_q = TASKS[task]
    needle_re = re.compile(r"One of the special magic %s for (%s) is: (%s)\." %
                           (value_type, PATTERN[key_type], PATTERN[value_type]))
    size = sample["size"]
    real = needle_re.findall(context)
    if haystack == "essay":
        rest = needle_re.sub("", context)
        check(f"{label}: the essay holds only the needles", "special magic" not in rest)
        check(f"{label}: the needles are joined by single spaces", "  " not in context
              and context == context.strip())
    else:
        lines = context.split("\n")
        n_needles = max(num_k, num_q) * num_v + (size if haystack == "needle" else 0)
        filler = [line for line in lines if line == NOISE]
        check(f"{label}: {len(lines)} lines = size {size} + needles",
              len(lines) == size + max(num_k, num_q) * num_v, str(len(lines)))
        if haystack == "noise":
            check(f"{label}: the other lines are RULER's noise", len(filler) == size)
        else:
            whole = [line for line in lines if needle_re.fullmatch(line)]
            check(f"{label}: every line is a needle (distractors)", len(whole) == len(lines))
        check(f"{label}: {n_needles} needles", len(real) == n_needles, str(len(real)))
    keys = [k for k, _ in real]
    queries = query.split(", and ")
    queries = queries[0].split(", ") + queries[1:] if len(queries) == 2 else queries
    check(f"{label}: {num_q} queried keys", len(queries) == num_q and len(set(queries)) == num_q, query)
    if num_q > 1:
        check(f"{label}: the query reads 'a, b, and c'",
              query == ", ".join(queries[:-1]) + ", and " + queries[-1], query)
    for q in queries:
        check(f"{label}: key {q} has {num_v} needles", keys.count(q) == num_v, str(keys.count(q)))
    answers = [v for q in queries for k, v in real if k == q]
    check(f"{label}: answers are the queried values", sorted(answers) == sorted(sample["answers"])
          and len(answers) == len(sample["answers"]), f"{answers} vs {sample['answers']}")
    if haystack != "needle":
        distinct = max(num_k, num_q)
        check(f"{label}: {distinct} distinct keys", len(set(keys)) == distinct, str(keys))
    return real


def check_tokens(sample, reference, fast, meta, length, context, plain, space, label):
    ids = sample["ids"]
    if plain:
        text = sample["user"] + " " + sample["answer_prefix"]
        want = tokref.expected_ids(reference, meta, text)
    else:
        rendered = fast.apply_chat_template([{"role": "user", "content": sample["user"]}], tokenize=False,
                                            add_generation_prompt=True)
        # kvpress's RULER data drop the answer prefix's leading space; RULER's
        # model_template + answer_prefix keeps it (--answer-prefix-space keep).
        text = rendered + (" " if space else "") + sample["answer_prefix"]
        want = reference.encode(text, add_special_tokens=False).ids
    check(f"{label}: the reference tokenizer gives the ids", want == ids,
          f"lengths {len(want)} / {len(ids)}")
    check(f"{label}: tokens counts the ids", sample["tokens"] == len(ids))
    check(f"{label}: the text decodes the ids",
          reference.decode(ids, skip_special_tokens=False) == sample["text"])
    check(f"{label}: {len(ids)} + {TOKENS_TO_GENERATE} <= {length}", len(ids) + TOKENS_TO_GENERATE <= length)
    check(f"{label}: the next size does not fit ({sample['next_tokens']})",
          sample["next_tokens"] + TOKENS_TO_GENERATE > length)
    check(f"{label}: boundary_consistent", sample["boundary_consistent"] is True)
    spans = {s["name"]: (s["begin"], s["end"]) for s in sample["spans"]}
    decode = lambda name: reference.decode(ids[slice(*spans[name])], skip_special_tokens=False)
    check(f"{label}: the context span is the context and its newline", decode("context") == context + "\n",
          repr(decode("context")[-40:]))
    question = sample["user"][sample["user"].rindex("\n") + 1:]
    check(f"{label}: the question span", decode("question") == question, repr(decode("question")))
    want_answer = (" " if plain or space else "") + sample["answer_prefix"]
    check(f"{label}: the answer_prefix span ends the prompt",
          decode("answer_prefix") == want_answer and spans["answer_prefix"][1] == len(ids))
    return spans, decode


def check_marks(real, spans, decode, context, label):
    order = sorted(real, key=lambda kv: context.index(f"for {kv[0]} is: {kv[1]}."))
    for i, (key, value) in enumerate(order):
        suffix = "" if i == 0 else f"_{i + 1}"
        needle, value_span = "needle" + suffix, "needle_value" + suffix
        if not check(f"{label}: spans {needle} and {value_span}", needle in spans and value_span in spans):
            continue
        text = decode(needle).strip()
        check(f"{label}: {needle} is the needle of {key}",
              text.endswith(f"for {key} is: {value}.") and text.startswith("One of"), repr(text))
        check(f"{label}: {value_span} is {value}", decode(value_span).strip() == value,
              repr(decode(value_span)))
        inside = spans["context"][0] <= spans[needle][0] <= spans[value_span][0] and \
            spans[value_span][1] <= spans[needle][1] <= spans["context"][1]
        check(f"{label}: {needle} lies in the context", inside)


def main():
    if not os.path.exists(MODEL) or not DUMP:
        print(f"SKIP: no model at {MODEL} or no OBC_RULER_DUMP")
        return 0
    meta = tokref.read_metadata(MODEL)
    reference = tokref.build_reference(meta)
    fast = PreTrainedTokenizerFast(tokenizer_object=reference, bos_token=meta["tokens"][meta["bos"]],
                                   eos_token=meta["tokens"][meta["eos"]])
    fast.chat_template = meta["chat_template"]
    runs = [(length, seed, False, False) for length in (512, 1024, 2048) for seed in (1, 2)]
    runs += [(1024, 3, True, False), (1024, 4, False, True)]
    for task in TASKS:
        for length, seed, plain, space in runs:
            label = f"{task} L{length} s{seed}{' plain' if plain else ''}{' space' if space else ''}"
            sample = dump(task, length, seed, plain, space)
            context, query = parse_user(task, sample, label)
            if context is None:
                continue
            real = check_context(task, sample, context, query, label)
            spans, decode = check_tokens(sample, reference, fast, meta, length, context, plain, space,
                                         label)
            check_marks(real if TASKS[task][0] != "needle" else
                        [kv for kv in real if kv[0] == query], spans, decode, context, label)
        a, b = dump(task, 1024, 1), dump(task, 1024, 2)
        check(f"{task}: seeds 1 and 2 give different prompts", a["ids"] != b["ids"])
    print(f"{len(FAILED)} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
