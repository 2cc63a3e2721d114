#!/usr/bin/env bash
# The naming rule (CONTRIBUTING.md, "Names"): every global symbol of the
# library starts with the name of the folder or of the file that defines it
# (trace_open in traces/, evict_policy_apply in evict/policy.c, cpu_ops_... in
# runtime/cpu_ops.c may also be cpu_...: a file's first word counts), with
# the folder aliases below; obc_ belongs to common/ alone. Read from the
# static library with nm, so a new public function that breaks the rule fails
# here. Then the check must fail on a symbol that breaks it.
set -u
. "$(dirname "$0")/lib.sh"
SRC=${OBC_SOURCE_DIR:?set OBC_SOURCE_DIR to the source tree}
LIB=${OBC_LIBRARY:?set OBC_LIBRARY to libobcache_lib.a}

# check_symbols NM_OUTPUT_FILE: prints each symbol that breaks the rule; exit 1 if any.
check_symbols() {
  python3 - "$SRC" "$1" <<'PYEOF'
import os, re, sys
root, listing = sys.argv[1], sys.argv[2]
aliases = {"analyze": {"analysis"}, "scores": {"score"}, "plots": {"plot"}, "traces": {"trace"},
           "common": {"obc"}}
folder_of = {}
for d, dirs, files in os.walk(root):
    rel = os.path.relpath(d, root)
    top = rel.split(os.sep)[0]
    if rel == ".":
        continue
    if top.startswith((".", "build")) or top in ("tests", "bench", "scripts", "docs"):
        dirs[:] = []
        continue
    for f in files:
        if f.endswith((".c", ".cu")):
            folder_of[f] = rel
bad = checked = 0
for line in open(listing):
    m = re.match(r".*?:?([A-Za-z0-9_]+\.(?:c|cu))\.o:\s*(?:[0-9a-f]+\s+)?[TDBRC]\s+(\S+)$", line)
    if not m:
        continue
    source, symbol = m.group(1), m.group(2)
    if symbol.startswith("."):  # compiler-made (named OpenMP critical sections)
        continue
    folder = folder_of.get(source)
    if folder is None:
        continue
    top, base = folder.split(os.sep)[0], source.rsplit(".", 1)[0]
    allowed = {top, base, base.split("_")[0]} | aliases.get(top, set())
    checked += 1
    if not any(symbol == a or symbol.startswith(a + "_") for a in allowed):
        print(f"{folder}/{source}: {symbol} (expected a prefix of {', '.join(sorted(allowed))})")
        bad += 1
    elif symbol.startswith("obc_") and top != "common":
        print(f"{folder}/{source}: {symbol} (obc_ is common/'s)")
        bad += 1
print(f"checked {checked} global symbols", file=sys.stderr)
sys.exit(1 if bad else 0)
PYEOF
}

scratch names
# __odr_asan.*: the one-definition-rule markers GCC's AddressSanitizer emits
# beside instrumented globals (the sanitizer tree of `make test`), not ours.
nm -A --defined-only -g "$LIB" 2>/dev/null | grep -v ' __odr_asan\.' > "$dir/nm.txt"
if out=$(check_symbols "$dir/nm.txt" 2>&1); then
  pass "every global symbol follows the naming rule ($out)"
else
  fail "names:"
  echo "$out"
fi
echo "$LIB:oracle.c.o:0000000000000000 T obc_stray_function" >> "$dir/nm.txt"
if out=$(check_symbols "$dir/nm.txt" 2>&1); then
  fail "a stray obc_ function in oracle/ was not caught"
else
  pass "a symbol that breaks the rule is caught: $(grep -m1 stray <<< "$out")"
fi
finish
