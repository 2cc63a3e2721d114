#!/usr/bin/env bash
# The RULER prompts of tests/data/ruler/ (tests/make_ruler_fixtures.sh) are
# what tests/ruler_dump builds, byte for byte, so that any change to a
# task's text, search, template or spans shows in the fixtures' diff. Needs
# OBC_RULER_DUMP, OBC_SOURCE_DIR and OBC_MODEL; skips without the model.
set -u
. "$(dirname "$0")/lib.sh"
DUMP=${OBC_RULER_DUMP:?set OBC_RULER_DUMP to tests/ruler_dump}
SRC=${OBC_SOURCE_DIR:?set OBC_SOURCE_DIR to the source tree}
MODEL=${OBC_MODEL:-$SRC/models/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -f "$MODEL" ]; then
  echo "SKIP: no model at $MODEL"
  exit 0
fi
scratch ruler_fixtures
# As tests/make_ruler_fixtures.sh writes them.
fixture_length() { case $1 in niah_*) echo 512 ;; *) echo 1024 ;; esac; }
tasks=$("$DUMP" --list) || fatal "ruler_dump --list"
[ -n "$tasks" ] || fatal "ruler_dump lists no task"
for task in $tasks; do
  fixture=$SRC/tests/data/ruler/$task.json
  if [ ! -f "$fixture" ]; then
    fail "$task: no fixture $fixture (run tests/make_ruler_fixtures.sh)"
    continue
  fi
  if ! "$DUMP" --model "$MODEL" --task "$task" --length "$(fixture_length "$task")" --seed 1 >"$dir/$task.json"; then
    fail "$task: ruler_dump failed"
  elif cmp -s "$fixture" "$dir/$task.json"; then
    pass "$task: the sample is the fixture"
  else
    fail "$task: the sample differs from $fixture (tests/make_ruler_fixtures.sh if meant)"
    diff "$fixture" "$dir/$task.json" | head -5
  fi
done
for fixture in "$SRC"/tests/data/ruler/*.json; do
  name=$(basename "$fixture" .json)
  case $name in *-text) continue ;; esac # a generator's text (test_ruler_words_reference.py)
  echo "$tasks" | grep -qx "$name" || fail "$name: a fixture of no task"
done
finish
