#!/usr/bin/env bash
# The commit-msg hook (scripts/commit-msg): a subject of up to 72 characters
# passes, a longer or an empty one is refused with one line on stderr that
# says the length and the limit; comment lines, blank lines before the
# subject and everything after git's scissors line are not the subject, a
# fixup!/squash!/amend! prefix is not counted and git's default merge
# subjects pass. Run with sh (dash on Debian), as git runs a hook, inside a
# repository of its own with git's default commentChar, then with another.
set -u
. "$(dirname "$0")/lib.sh"
SRC=${OBC_SOURCE_DIR:?set OBC_SOURCE_DIR to the source tree}
HOOK=$SRC/scripts/commit-msg
scratch commit_msg
git init -q "$dir/repo" || fatal "git init"
cd "$dir/repo" || fatal "cd $dir/repo"

# chars N: a subject of N characters
chars() { printf 'x%.0s' $(seq "$1"); }

# accepts NAME MESSAGE: the hook exits 0 and prints nothing
accepts() {
  printf '%s' "$2" > "$dir/msg"
  if sh "$HOOK" "$dir/msg" > "$dir/out" 2> "$dir/err" && [ ! -s "$dir/out" ] && [ ! -s "$dir/err" ]; then
    pass "$1"
  else
    fail "$1: exit $?, stderr: $(cat "$dir/err")"
  fi
}

# refuses NAME TEXT MESSAGE: exit 1, one line on stderr containing TEXT
refuses() {
  printf '%s' "$3" > "$dir/msg"
  sh "$HOOK" "$dir/msg" > "$dir/out" 2> "$dir/err"
  local rc=$?
  if [ "$rc" -eq 1 ] && [ "$(wc -l < "$dir/err")" -eq 1 ] && grep -qF -- "$2" "$dir/err" &&
    [ ! -s "$dir/out" ]; then
    pass "$1: $(cat "$dir/err")"
  else
    fail "$1: exit $rc, stderr: $(cat "$dir/err")"
  fi
}

s72=$(chars 72)
s73=$(chars 73)
accepts "72 characters" "$s72"$'\n'
accepts "72 characters, then a body of long lines" "$s72"$'\n\n'"$(chars 200)"$'\n'
accepts "no newline at the end" "short subject"
refuses "73 characters" "the subject is 73 characters, the limit is 72" "$s73"$'\n'
refuses "100 characters with a body" "the subject is 100 characters, the limit is 72" \
  "$(chars 100)"$'\n\nbody\n'
accepts "trailing spaces are not counted (git strips them)" "$s72   "$'\n'
accepts "a CRLF line end is not counted" "$s72"$'\r\n'
# 72 characters, 144 bytes: characters are counted, not bytes
accepts "72 two-byte UTF-8 characters" "$(printf 'é%.0s' $(seq 72))"$'\n'
refuses "73 two-byte UTF-8 characters" "the subject is 73 characters" \
  "$(printf 'é%.0s' $(seq 73))"$'\n'

template=$'\n# Please enter the commit message for your changes. Lines starting\n# with \'#\' will be ignored, and an empty message aborts the commit.\n#\n# On branch main\n'
refuses "git's template alone: empty subject" "the subject is empty" "$template"
refuses "empty file" "the subject is empty" ""
refuses "blank lines only" "the subject is empty" $'\n   \n\n'
accepts "comment lines and blank lines before the subject are skipped" \
  $'# '"$(chars 100)"$'\n\n'"$s72"$'\n'"$template"
refuses "the subject after comment lines is measured" "the subject is 73 characters" \
  $'# note\n'"$s73"$'\n'"$template"
scissors=$'# ------------------------ >8 ------------------------\n# Do not modify or remove the line above.\ndiff --git a/'"$(chars 100)"$'\n'
refuses "nothing after the scissors line is read (git commit -v)" "the subject is empty" \
  "$template$scissors"
accepts "a subject before the scissors line" "$s72"$'\n'"$template$scissors"

accepts "fixup! prefix not counted" "fixup! $s72"$'\n'
accepts "squash! prefix not counted" "squash! $s72"$'\n'
accepts "amend! prefix not counted" "amend! $s72"$'\n'
accepts "fixup! fixup! prefixes not counted" "fixup! fixup! $s72"$'\n'
refuses "fixup! of a subject over the limit" "the subject is 73 characters" "fixup! $s73"$'\n'
accepts "git's default merge subject, any length" \
  "Merge branch 'h-$(chars 80)' into main"$'\n'"$template"
accepts "git's default merge of a remote-tracking branch" \
  "Merge remote-tracking branch 'origin/$(chars 80)'"$'\n'
refuses "a hand-written subject that starts with Merge" "the subject is" "Merge $s73"$'\n'

git config core.commentChar ';'
accepts "core.commentChar ';': its comment lines are skipped" $'; '"$(chars 100)"$'\n'"$s72"$'\n'
refuses "core.commentChar ';': a '#' line is the subject" "the subject is 101 characters" \
  $'# '"$(chars 99)"$'\n'"$s72"$'\n'
git config core.commentChar auto
accepts "core.commentChar auto: '#' comments" $'# '"$(chars 100)"$'\n'"$s72"$'\n'

# As git runs it: a real commit through the installed hook.
mkdir -p .git/hooks && cp "$HOOK" .git/hooks/commit-msg && chmod +x .git/hooks/commit-msg
git config user.email test@example.com && git config user.name test
git config --unset core.commentChar
echo a > a && git add a
if git commit -q -m "$s73" 2> "$dir/err"; then
  fail "git commit with a 73-character subject went through"
elif grep -qF "the subject is 73 characters, the limit is 72" "$dir/err"; then
  pass "git commit refuses a 73-character subject"
else
  fail "git commit: unexpected stderr: $(cat "$dir/err")"
fi
check "git commit takes a 72-character subject" git commit -q -m "$s72"
finish
