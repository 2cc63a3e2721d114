#!/usr/bin/env bash
# Checks that every tracked C, header and CUDA file is formatted as
# .clang-format says (clang-format --dry-run --Werror), prints the files that
# are not, and exits non-zero if there is any. With --fix, reformats them in
# place instead (`make format`). CLANG_FORMAT picks the binary; the style is
# tuned for clang-format 14 (Debian 12), other versions may disagree on details.
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
  "") ;;
  --fix) fix=1 ;;
  -h | --help)
    echo "usage: scripts/check_format.sh [--fix]"
    exit 0
    ;;
  *)
    echo "check_format: unknown argument '$1' (usage: scripts/check_format.sh [--fix])" >&2
    exit 2
    ;;
esac

CF=${CLANG_FORMAT:-clang-format}
if ! command -v "$CF" >/dev/null; then
  echo "check_format: $CF not found (hint: scripts/setup.sh --tests installs clang-format)" >&2
  exit 2
fi
version=$("$CF" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ "$version" != 14 ]; then
  echo "check_format: warning: $CF is version ${version:-unknown}; .clang-format is tuned for 14" >&2
fi

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.c' '*.h' '*.cu' '*.cuh')
else # an exported tree without .git
  mapfile -t files < <(find . -path ./build\* -prune -o -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's|^\./||' | sort)
fi

if [ "$fix" = 1 ]; then
  "$CF" -i --style=file "${files[@]}"
  echo "check_format: formatted ${#files[@]} files"
  exit 0
fi

bad=()
for f in "${files[@]}"; do
  "$CF" --dry-run --Werror --style=file "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf '%s\n' "${bad[@]}"
  echo "check_format: ${#bad[@]} of ${#files[@]} files are not formatted as .clang-format says" \
    "(fix: make format, or clang-format -i FILE)" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
