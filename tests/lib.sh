# The pieces every shell test (tests/test_*.sh) shares. A test sources it
# right after `set -u`:
#   . "$(dirname "$0")/lib.sh"
# which works under ctest (it runs `bash /full/path/tests/test_NAME.sh`) and
# by hand from any folder. Each test still says itself which paths of the
# environment it needs (OBCACHE, OBC_SOURCE_DIR, OBC_MODEL, OBC_TMP,
# OBC_LIBRARY: tests/CMakeLists.txt) and what it does without the model.
#
#   pass MESSAGE       prints "ok    MESSAGE"
#   fail MESSAGE       prints "FAIL  MESSAGE" and counts a failure in
#                      $failures (a subshell hands its count back by exit)
#   check NAME CMD...  runs CMD: pass NAME when it exits 0, else fail NAME
#   fatal MESSAGE      fail MESSAGE, then finish: a step the rest depends on
#   scratch NAME       sets dir to a new folder NAME.XXXXXX under $OBC_TMP
#                      (else /tmp); at exit it is removed when the test
#                      passed and kept, its path printed, when it did not. A
#                      test that defines on_exit has it run at exit first.
#   finish             says whether every check passed; exits 1 if one failed
#   fails NAME PATTERN ARGS...
#                      runs "$OBCACHE" ARGS (output in $dir/out, $dir/err):
#                      pass NAME when it exits 1 with one line on stderr
#                      matching PATTERN (grep), else fail NAME
#   expect_refused NAME TEXT CMD...
#                      pass NAME when CMD exits non-zero with one line on
#                      stderr containing TEXT (a fixed string) and leaves no
#                      $dir/k.h5 (the keep file the command would write)
#   is_png FILE, is_svg FILE
#                      whether FILE is a PNG (its signature) or a closed SVG
#                      document of at least $MIN_PNG_BYTES / $MIN_SVG_BYTES
#                      (8000 unless the test sets them: a titled, labelled
#                      figure is far larger, an empty canvas about 2 KB)

failures=0
dir=

pass() {
  echo "ok    $*"
}

fail() {
  echo "FAIL  $*"
  failures=$((failures + 1))
}

check() { # check NAME CMD...
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
  fi
  echo "all checks passed"
  exit 0
}

fatal() {
  fail "$*"
  finish
}

fails() { # fails NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  "$OBCACHE" "$@" > "$dir/out" 2> "$dir/err"
  local rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l < "$dir/err")" -eq 1 ] && grep -q -- "$pattern" "$dir/err"; then
    pass "$name"
  else
    fail "$name (rc $rc): $(cat "$dir/err")"
  fi
}

expect_refused() { # expect_refused NAME TEXT CMD...
  local name=$1 text=$2
  shift 2
  rm -f "$dir/k.h5"
  "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$dir/err")
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -qF -- "$text" "$dir/err" && [ ! -e "$dir/k.h5" ]; then
    pass "$name: exit $rc, $(cat "$dir/err")"
  else
    fail "$name: exit $rc, $lines stderr line(s): $(cat "$dir/err")"
  fi
}

MIN_PNG_BYTES=${MIN_PNG_BYTES:-8000}
MIN_SVG_BYTES=${MIN_SVG_BYTES:-8000}

is_png() { # is_png FILE: the 8-byte PNG signature 89 50 4E 47 0D 0A 1A 0A and a minimal size
  [ -f "$1" ] || return 1
  [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || return 1
  [ "$(stat -c %s "$1")" -ge "$MIN_PNG_BYTES" ]
}

is_svg() { # is_svg FILE: an <svg> document of a minimal size that is closed properly
  [ -f "$1" ] && grep -q "<svg" "$1" && grep -q "</svg>" "$1" &&
    [ "$(stat -c %s "$1")" -ge "$MIN_SVG_BYTES" ]
}

same_sweep() { # same_sweep DIR_A DIR_B: two sweep folders' summary.csv, index.html and recall heat map equal
  cmp -s "$1/summary.csv" "$2/summary.csv" && cmp -s "$1/index.html" "$2/index.html" &&
    cmp -s "$1/plots/sweep_recall.png" "$2/plots/sweep_recall.png"
}

scratch() { # scratch NAME
  dir=$(mktemp -d "${OBC_TMP:-/tmp}/$1.XXXXXX") || {
    echo "FAIL  cannot make a scratch folder under ${OBC_TMP:-/tmp}"
    exit 1
  }
  trap lib_exit EXIT
}

# The EXIT trap: on_exit, then the scratch folder (made writable first: tests
# lock folders to make writes fail) goes when nothing failed. The script's
# exit status stays what it was.
lib_exit() {
  local status=$?
  if declare -F on_exit > /dev/null; then on_exit; fi
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    if [ "$status" -eq 0 ] && [ "$failures" -eq 0 ]; then
      chmod -R u+w "$dir" 2> /dev/null || true
      rm -rf "$dir"
    else
      echo "scratch folder kept: $dir"
    fi
  fi
}
