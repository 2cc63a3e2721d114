#!/usr/bin/env python3
"""One vocabulary across the commands (docs/CLI.md, "One spelling per
concept"): walks every command's option table (`obcache COMMAND
--help-options`, the table the parser and the help are made from) and fails
on two spellings of one concept, on an output option that is not
`-o, --output`, on an old spelling that does not name its new one or still
shows in the help, and on one option with two defaults in two commands
(except where the option is a list of experimental conditions or a size
chosen for what the command makes, each named below with its reason)."""
import os
import subprocess
import sys

OBCACHE = os.environ.get("OBCACHE", "build/obcache")

# concept -> the one spelling (a list option may add an "s": --budget B for
# one, --budgets B,.. for many), and spellings that must not appear as
# options of their own.
CONCEPTS = {
    "output": ("--output", ["--out", "--output-dir", "--outdir"]),
    "top-k budget of recall": ("--topk", ["--k", "--top-k", "--top"]),
    "kept-token budget": ("--budget", ["--kept", "--keep-budget", "--cache-budget"]),
    "answer tokens": ("--max-new-tokens", ["--max-new", "--max-tokens", "--answer-tokens"]),
    "query protocol": ("--protocol", ["--mode", "--protocols"]),
    "haystack text": ("--haystack", ["--essay", "--text-file", "--corpus"]),
    "first positions always kept": ("--sinks", ["--sink", "--n-sinks"]),
    "last positions always kept": ("--recent", ["--window-recent", "--num-recent"]),
    "token ids given": ("--ids", ["--decode-ids", "--token-ids"]),
    "prompt positions": ("--length", ["--prompt-length", "--n-prompt"]),
}
# The options that take decode steps (a count or a range); --decode means
# nothing else anywhere.
STEP_PLACEHOLDERS = {"--decode": {"T"}, "--oracle": {"1|T|N|a-b"}, "--steps": {"T"}}
# Plurals: a list of what the singular takes one of.
LISTS = {"--budgets", "--scores", "--lengths", "--depths", "--tasks"}
# The same option with other defaults in other commands, on purpose.
DEFAULTS_DIFFER = {
    "--budgets": "each command's list of experimental conditions (dynamic's are tokens)",
    "--scores": "each command's list of policies compared",
    "--rows": "synth makes small test traces; capture keeps what the scores need",
    "--decode": "synth makes small test traces; capture decodes a NIAH answer",
    "--max-new-tokens": "eval follows RULER per task, replay the captured answer, generate 128",
    "--context": "perplexity's sliding window (1024, stride 512) vs a whole prompt's context",
    "--output": "derived from each command's input",
    "--lengths": "sweep's grid vs eval's one length",
}


def commands():
    text = subprocess.run([OBCACHE, "--help"], capture_output=True, text=True).stdout
    section = text.split("commands:", 1)[1].split("\n\n", 1)[0]
    names = [line.split()[0] for line in section.splitlines() if line.startswith("  ")]
    return [n for n in names if n != "version"]


def table(command):
    out = subprocess.run([OBCACHE, command, "--help-options"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL {command} --help-options: exit {out.returncode}: {out.stderr}")
    rows = []
    for line in out.stdout.splitlines():
        cols = line.split("\t")
        if len(cols) != 6 or cols[0] != command:
            sys.exit(f"FAIL {command} --help-options: not a table row: {line!r}")
        rows.append(dict(zip(("command", "name", "alias", "value", "default", "note"), cols)))
    return rows


failures = []
rows = [r for c in commands() for r in table(c)]
if len({r["command"] for r in rows}) < 15:
    failures.append(f"only {len({r['command'] for r in rows})} commands have an option table")
visible = [r for r in rows if r["note"] == ""]
names = {r["name"] for r in visible} | {r["alias"] for r in visible if r["alias"]}

for concept, (spelling, others) in CONCEPTS.items():
    for other in others:
        if other in names:
            where = sorted({r["command"] for r in visible if other in (r["name"], r["alias"])})
            failures.append(f"{concept}: {other} in {', '.join(where)} (spelled {spelling})")

for r in rows:
    label = f"{r['command']} {r['name']}"
    outputs = r["name"] in ("-o", "--output") or r["alias"] == "-o"
    if outputs and (r["name"], r["alias"]) != ("--output", "-o"):
        failures.append(f"{label}: an output is -o, --output (alias {r['alias'] or 'none'})")
    if r["note"] not in ("", "hidden"):
        if r["note"] not in names:
            failures.append(f"{label}: old spelling of {r['note']}, which is no option")
    if r["name"] in STEP_PLACEHOLDERS and r["note"] == "" and \
            r["value"] not in STEP_PLACEHOLDERS[r["name"]]:
        failures.append(f"{label} {r['value']}: takes decode steps everywhere")
    if r["name"] in LISTS and r["note"] == "" and \
            not (r["value"].endswith(",..") or "[," in r["value"]):
        failures.append(f"{label} {r['value']}: the plural of an option takes a list")

defaults = {}
for r in visible:
    if r["default"]:
        defaults.setdefault(r["name"], {}).setdefault(r["default"], []).append(r["command"])
for name, seen in sorted(defaults.items()):
    if len(seen) > 1 and name not in DEFAULTS_DIFFER:
        failures.append(f"{name}: defaults differ: " +
                        "; ".join(f"{d} ({', '.join(c)})" for d, c in seen.items()))

# Every policy-taking command lists the same score names: evict and replay
# print the table's, eval points to them.
helps = {c: subprocess.run([OBCACHE, c, "--help"], capture_output=True, text=True).stdout
         for c in ("evict", "replay")}
score_lines = {c: " ".join(h.split("--score S", 1)[1].split("--oracle", 1)[0].split())
               for c, h in helps.items()}
if score_lines["evict"] != score_lines["replay"]:
    failures.append("evict and replay --help list other --score names")

for f in failures:
    print("FAIL", f)
print(f"{len(rows)} options of {len({r['command'] for r in rows})} commands, "
      f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
