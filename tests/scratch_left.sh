#!/usr/bin/env bash
# The cleanup step of CTest's fixture "scratch" (tests/CMakeLists.txt): after
# every test of the run, lists what was made in OBC_TMP since scratch_begin
# stamped it, and fails if anything is there. A passing test removes what it
# made (tests/lib.sh `scratch`, tests/test_env.h test_scratch_begin/end, a
# Python test's own folder); a failing one keeps its folder and prints its
# path, so this step fails with it.
#
# usage: tests/scratch_left.sh OBC_TMP STAMP [CORE...]
#   CORE: the folders of the @CORE twins, which stay (empty).
set -u
[ $# -ge 2 ] || { echo "usage: tests/scratch_left.sh OBC_TMP STAMP [CORE...]" >&2; exit 2; }
tmp=$1 stamp=$2
shift 2
keep=()
for core in "$@"; do keep+=(! -path "$tmp/$core"); done
left=$( (find "$tmp" -mindepth 1 -newer "$stamp" ! -type d ! -path "$stamp"
  find "$tmp" -mindepth 1 -newer "$stamp" -type d -empty "${keep[@]}") | sort)
if [ -n "$left" ]; then
  echo "left in $tmp since the run began ($(echo "$left" | wc -l) paths; a passing test must remove what it made):"
  echo "$left" | head -40
  exit 1
fi
echo "nothing left in $tmp"
