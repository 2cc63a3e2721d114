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
