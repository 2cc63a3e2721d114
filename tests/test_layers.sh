#!/usr/bin/env bash
# The folder rules of docs/ARCHITECTURE.md hold: every #include "dir/..." of a
# library or cli source points at its own folder or one its table row lists
# under "may include", and every folder with C sources has a row. Then the
# same check on a copy of the tree with one wrong-way include added
# (common/ including cli/) must fail and name the file, so the check cannot
# pass by reading nothing.
set -u
. "$(dirname "$0")/lib.sh"
SRC=${OBC_SOURCE_DIR:?set OBC_SOURCE_DIR to the source tree}
scratch layers

# check_tree ROOT: prints one line per violation; exit 1 when there is one.
check_tree() {
  python3 - "$1" <<'EOF'
import os, re, sys
root = sys.argv[1]
rules = {}
for line in open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8"):
    m = re.match(r"\|\s*`([a-z_]+)/`\s*\|.*\|([^|]*)\|\s*$", line)
    if m:
        rules[m.group(1)] = set(re.findall(r"`([a-z_]+)`", m.group(2)))
if not rules:
    sys.exit(f"{root}/docs/ARCHITECTURE.md: no folder table found")
outside = {"tests", "bench", "scripts", "docs", "models", "out", "demo-out"}
bad = 0
seen = 0
for top in sorted(os.listdir(root)):
    path = os.path.join(root, top)
    if not os.path.isdir(path) or top.startswith((".", "build")) or top in outside:
        continue
    sources = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs
               if f.endswith((".c", ".h", ".cu"))]
    if not sources:
        continue
    if top not in rules:
        print(f"{top}/: has C sources but no row in docs/ARCHITECTURE.md")
        bad += 1
        continue
    for src in sorted(sources):
        seen += 1
        for n, text in enumerate(open(src, encoding="utf-8", errors="replace"), 1):
            m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', text)
            if m and m.group(1) != top and m.group(1) not in rules[top] and m.group(1) in rules:
                print(f"{os.path.relpath(src, root)}:{n}: {top}/ includes {m.group(1)}/ "
                      f"(allowed: {', '.join(sorted(rules[top])) or 'nothing'})")
                bad += 1
print(f"checked {seen} files in {len(rules)} folders", file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}

if out=$(check_tree "$SRC" 2>&1); then
  pass "every include follows docs/ARCHITECTURE.md ($out)"
else
  fail "includes against docs/ARCHITECTURE.md:"
  echo "$out"
fi

# A copy with one wrong-way include must fail.
mkdir -p "$dir/tree"
(cd "$SRC" && find . -path ./build -prune -o -path './build*' -prune -o \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name ARCHITECTURE.md \) -print |
  while read -r f; do mkdir -p "$dir/tree/$(dirname "$f")" && cp "$f" "$dir/tree/$f"; done)
printf '#include "cli/commands.h"\n' >> "$dir/tree/common/obc_error.c"
if out=$(check_tree "$dir/tree" 2>&1); then
  fail "a wrong-way include (common/ -> cli/) was not caught"
elif grep -q "common/obc_error.c:.*common/ includes cli/" <<< "$out"; then
  pass "a wrong-way include is caught: $(grep -m1 'includes cli/' <<< "$out")"
else
  fail "wrong-way include: unexpected output: $out"
fi

finish
