#!/usr/bin/env bash
# obcache CMD --help for every command `obcache --help` lists: each exits 0
# and prints one layout (the usage line, what the command does, "options:",
# the option list, "-h, --help" last), every line within 80 columns, and no
# option's description states its default twice (once in the text and once
# as the "(default X)" the help printer adds from the code's value).
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch help

commands=$("$OBCACHE" --help | sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p' | grep -v '^version$')
[ "$(echo "$commands" | wc -w)" -ge 15 ] && pass "obcache --help lists $(echo $commands)" ||
  fail "obcache --help lists too few commands: $commands"

for cmd in $commands; do
  help=$dir/$cmd.txt
  if ! "$OBCACHE" "$cmd" --help >"$help" 2>"$dir/err" || [ -s "$dir/err" ]; then
    fail "$cmd --help: exit non-zero or stderr: $(cat "$dir/err")"
    continue
  fi
  # One option entry a line: continuation lines (indented past the names)
  # joined to the line of their option.
  twice=$(awk '
    /^  -/ { if (entry != "") print entry; entry = $0; next }
    /^                       / && entry != "" { entry = entry " " substr($0, 24); next }
    { if (entry != "") print entry; entry = "" }
    END { if (entry != "") print entry }' "$help" | grep -E '\(default.*\(default' || true)
  [ -z "$twice" ] && pass "$cmd --help: every default once" ||
    fail "$cmd --help: a default stated twice: $twice"
  long=$(awk 'length > 80' "$help")
  [ -z "$long" ] && pass "$cmd --help: within 80 columns" ||
    fail "$cmd --help: lines over 80 columns: $long"
  if head -n 1 "$help" | grep -q "^usage: obcache $cmd " && grep -qx "options:" "$help" &&
    [ "$(tail -n 1 "$help")" = "  -h, --help           this help" ]; then
    pass "$cmd --help: usage, options, -h last"
  else
    fail "$cmd --help: layout: $(head -n 1 "$help") ... $(tail -n 1 "$help")"
  fi
done
finish
