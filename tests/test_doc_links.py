"""The Markdown pages hold together: every relative link of every *.md file of
the source tree names a file or folder that exists and, with a #fragment, a
heading of that page (GitHub's anchors: lower case, punctuation dropped,
spaces to hyphens, -1, -2 for repeats). The README links to every page of
docs/, keeps the two commands `make demo` and `make test` (.ci/run runs the
README's test command) and stays a front page of at most 250 lines. Then the
same check on a scratch tree with a broken file link and a broken anchor must
report both, so the check cannot pass by reading nothing.

Environment: OBC_SOURCE_DIR (the source tree), OBC_TMP (scratch folder).
No model and no binary needed."""
import os
import re
import shutil
import sys
import tempfile

SOURCE = os.environ.get("OBC_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
TMP = os.environ.get("OBC_TMP", tempfile.gettempdir())
README_MAX_LINES = 250
# Folders that are not the project's pages: build trees, the model, outputs.
SKIP_DIRS = {"models", "demo-out", "gpu-kit", "gpu-results", "out", "node_modules"}
failures = []

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, line.rstrip("\n")


def slug(heading):
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.lower().replace("`", "")
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    out = set()
    for _, line in prose_lines(path):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def markdown_files(root):
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs
                         if not d.startswith((".", "build")) and d not in SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(top, name)


def broken_links(root):
    """(problems, links checked) over every Markdown file under root."""
    problems = []
    count = 0
    cache = {}
    for page in markdown_files(root):
        for number, line in prose_lines(page):
            for target in LINK.findall(CODE_SPAN.sub("", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:
                    continue
                count += 1
                where = f"{os.path.relpath(page, root)}:{number}: ({target})"
                file_part, _, fragment = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(page), file_part)) \
                    if file_part else page
                if not os.path.exists(dest):
                    problems.append(f"{where} no such file")
                    continue
                if not fragment:
                    continue
                if not dest.endswith(".md") or os.path.isdir(dest):
                    problems.append(f"{where} an anchor into a page that is not Markdown")
                    continue
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if fragment not in cache[dest]:
                    problems.append(f"{where} no heading with the anchor #{fragment}")
    return problems, count


problems, count = broken_links(SOURCE)
for p in problems:
    print("      " + p)
check(not problems, f"every one of the {count} relative links resolves ({len(problems)} broken)")

readme = os.path.join(SOURCE, "README.md")
with open(readme, encoding="utf-8") as f:
    text = f.read()
linked = {os.path.normpath(t.partition("#")[0]) for _, line in prose_lines(readme)
          for t in LINK.findall(CODE_SPAN.sub("", line))}
pages = sorted("docs/" + n for n in os.listdir(os.path.join(SOURCE, "docs")) if n.endswith(".md"))
unlinked = [p for p in pages if p not in linked]
check(not unlinked, "README.md links to every page of docs/ (not: " + ", ".join(unlinked) + ")")
lines = text.count("\n")
check(lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})")
for command in ("make demo", "make test"):
    check(re.search(r"^\s+" + command + r"\b", text, re.M) is not None,
          f"README.md shows the command `{command}`")
with open(os.path.join(SOURCE, ".ci", "run"), encoding="utf-8") as f:
    check("make test" in f.read(), ".ci/run runs the README's test command, make test")

# The checker finds what it is meant to find.
os.makedirs(TMP, exist_ok=True)
scratch = tempfile.mkdtemp(prefix="doc_links.", dir=TMP)
os.makedirs(os.path.join(scratch, "docs"))
with open(os.path.join(scratch, "README.md"), "w", encoding="utf-8") as f:
    f.write("# Top\n\n## A `code` heading, with punctuation!\n\n"
            "[ok](docs/page.md#the-page) [ok](#a-code-heading-with-punctuation) "
            "[ok](#top) `[not a link](nowhere.md)`\n"
            "[missing file](docs/missing.md) [missing anchor](docs/page.md#nowhere)\n"
            "```\n[in code](nowhere.md)\n```\n")
with open(os.path.join(scratch, "docs", "page.md"), "w", encoding="utf-8") as f:
    f.write("# The page\n\n[back](../README.md#top) [https](https://example.org/x)\n")
planted, planted_count = broken_links(scratch)
check(planted_count == 6, f"a planted tree's 6 relative links are read ({planted_count})")
check(len(planted) == 2 and "docs/missing.md" in planted[0] and "#nowhere" in planted[1],
      "a planted missing file and missing anchor are both reported: " + "; ".join(planted))

if failures:
    print(f"{len(failures)} check(s) failed; scratch kept in {scratch}")
    sys.exit(1)
shutil.rmtree(scratch)
print("all checks passed")
