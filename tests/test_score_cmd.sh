#!/usr/bin/env bash
# Scores from a command per eval sample (eval --score-cmd NAME=CMD,
# eval/score_cmd.h). A NAME that is not a NAME, a built-in's, "full", one
# of --scores, given twice, or an empty CMD is refused before any folder is
# written. `eval DIR` runs a plan's commands only with --run-score-cmds. A
# command built from obcache itself (evict --scores-out of knorm
# on $OBC_TRACE) gives, on every sample and budget, knorm's kept count,
# recall, answer and RULER score; its output stays in the cell's log, its
# score file only with --keep-traces; the merge of the folder (another
# process) takes the command's policy. Four commands that fail (a non-zero
# exit, no file, another trace's scores, killed by a signal) each fail
# their sample in one stderr line naming the sample, NAME and how it ended
# (the log's last line), recorded in cells/<id>.failed, with no cell folder
# or partial folder left. The Python example (docs/PYTHON.md, run by
# test_python_module.sh) is the same check with NumPy.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}"
[ -r "$OBC_MODEL" ] || { echo "SKIP: no model at $OBC_MODEL (run scripts/setup.sh)"; exit 0; }
[ -r /usr/share/dict/words ] || { echo "SKIP: no /usr/share/dict/words (apt-get install wamerican)"; exit 0; }
python3 -c 'import json' 2>/dev/null || { echo "SKIP: no python3"; exit 0; }
scratch score_cmd
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1

# refused NAME PATTERN ARGS...: `fails`, and nothing left at $dir/x.
refused() {
  rm -rf "$dir/x"
  fails "$@"
  [ ! -e "$dir/x" ] || fail "$1: left $dir/x behind"
}
refused "a NAME with a space" "--score-cmd my score=true: NAME must have" \
  eval --score-cmd 'my score=true' --plan -o "$dir/x"
refused "no NAME=" "--score-cmd true: expected NAME=CMD" eval --score-cmd true --plan -o "$dir/x"
refused "an empty CMD" "--score-cmd mine= : CMD is empty" eval --score-cmd 'mine= ' --plan -o "$dir/x"
refused "a built-in's NAME" "--score-cmd knorm: a built-in score's name" \
  eval --score-cmd knorm=true --plan -o "$dir/x"
refused "full" "--score-cmd full: full is the uncompressed cache's row" \
  eval --score-cmd full=true --plan -o "$dir/x"
refused "a NAME twice" "--score-cmd mine: given twice" \
  eval --score-cmd mine=true --score-cmd mine=false --plan -o "$dir/x"

small=(--tasks niah_single_1 --length 512 --max-new-tokens 8 --no-figures)

# knorm through a command: evict --scores-out writes knorm's scores of the
# candidates with the trace's hash.
cmd='echo "scoring $OBC_SAMPLE as $OBC_SCORE_NAME"; '"'$OBCACHE'"' evict "$OBC_TRACE" --score knorm'
cmd+=' --budget 1 --scores-out "$OBC_SCORES" -o "$OBC_SCORES.keep.h5" >/dev/null && rm "$OBC_SCORES.keep.h5"'
ok=$dir/ok
"$OBCACHE" eval "${small[@]}" --samples 2 --scores knorm --score-cmd "mine=$cmd" \
  --budgets 10%,25% --keep-traces --plan -o "$ok" >"$dir/ok.txt" 2>&1 ||
  fatal "eval --plan: $(tail -3 "$dir/ok.txt")"
fails "eval DIR without --run-score-cmds" "plan.json runs 1 command(s) for each sample" eval "$ok"
check "... runs no sample" test ! -e "$ok/cells/0"
"$OBCACHE" eval "$ok" --run-score-cmds >"$dir/ok.txt" 2>&1 || fatal "eval: $(tail -3 "$dir/ok.txt")"
check "knorm from a command: the built-in's kept counts, recalls, answers and scores" \
  python3 - "$ok" <<'PY'
import json, sys
for cell in (0, 1):
    rows = json.load(open(f"{sys.argv[1]}/cells/{cell}/sample.json"))["rows"]
    by = {(r["policy"], r["budget"], r["protocol"]): r for r in rows}
    pairs = [(k, (("mine",) + k[1:])) for k in by if k[0] == "knorm"]
    assert len(pairs) == 2, pairs
    for a, b in pairs:
        for field in ("kept", "candidates", "recall", "answer", "score", "correct"):
            assert by[a][field] == by[b][field], (cell, a, field, by[a][field], by[b][field])
PY
check "the command's output in its log" \
  grep -qx "scoring niah_single_1_L512_S1 as mine" "$ok/cells/1/score-cmd-mine.log"
check "its score file kept with --keep-traces" test -s "$ok/cells/0/scores-mine.h5"
"$OBCACHE" eval "$ok" --merge --no-figures >"$dir/merge.txt" 2>&1 || fail "merge: $(tail -3 "$dir/merge.txt")"
check "the merge reports the command's policy" grep -q "^mine " "$dir/merge.txt"

# Four samples, each failing its own way; the third writes the scores of
# another trace.
"$OBCACHE" synth --layers 2 --length 64 --rows 16 --decode 2 -o "$dir/other.h5" >/dev/null ||
  fatal "synth"
cat >"$dir/failing.sh" <<SH
case \$OBC_SAMPLE in
  *_S0) echo "no model for \$OBC_SCORE_NAME" >&2; exit 3 ;;
  *_S1) echo "nothing to write" ;;
  *_S2) '$OBCACHE' evict '$dir/other.h5' --score knorm --budget 1 --scores-out "\$OBC_SCORES" \\
    -o "\$OBC_SCORES.keep.h5" ;;
  *_S3) kill -9 \$\$ ;;
esac
SH
bad=$dir/bad
"$OBCACHE" eval "${small[@]}" --samples 4 --scores knorm --budgets 25% \
  --score-cmd "broken=sh '$dir/failing.sh'" -o "$bad" >"$dir/bad.txt" 2>"$dir/bad.err"
rc=$?
check "failing commands fail the eval" test "$rc" -eq 1
failed() { # failed NAME ID PATTERN
  check "$1: one line naming the sample, the command and how it ended" \
    grep -q "sample $2 (niah_single_1_L512_S$2): --score-cmd broken: $3" "$dir/bad.err"
  check "$1: recorded in cells/$2.failed" grep -q -- "--score-cmd broken: $3" "$bad/cells/$2.failed"
  check "$1: no cell folder" test ! -e "$bad/cells/$2"
}
failed "a non-zero exit" 0 "exited with status 3: no model for broken"
failed "no file" 1 "exited 0 without writing \$OBC_SCORES"
failed "another trace's scores" 2 ".*scores of another trace"
failed "a signal" 3 "\\(exited with status 137\\|killed by signal 9\\)"
check "no partial folder left" eval '[ -z "$(ls -A "$bad/cells" | grep -v "\.failed$")" ]'
check "one line a sample, one summary" eval '[ "$(wc -l <"$dir/bad.err")" -eq 5 ]'

finish
