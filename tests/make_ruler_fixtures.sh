#!/usr/bin/env bash
# Writes tests/data/ruler/TASK.json, one sample of every RULER task of
# tests/ruler_dump (length 512 for the niah tasks, 1024 for vt, cwe and fwe,
# whose few-shot examples alone take about 500 tokens; seed 1; the default
# model's tokenizer and chat template), which tests/test_ruler_fixtures.sh compares byte for byte:
# run it after a change to the prompts is meant, and commit the diff.
#   tests/make_ruler_fixtures.sh [BUILD_DIR]   (default: build)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
dump=$build/tests/ruler_dump
model=${OBC_MODEL:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}
out=$src/tests/data/ruler
mkdir -p "$out"
fixture_length() { case $1 in niah_*) echo 512 ;; *) echo 1024 ;; esac; }
for task in $("$dump" --list); do
  "$dump" --model "$model" --task "$task" --length "$(fixture_length "$task")" --seed 1 >"$out/$task.json.tmp"
  mv "$out/$task.json.tmp" "$out/$task.json"
  echo "wrote $out/$task.json"
done
