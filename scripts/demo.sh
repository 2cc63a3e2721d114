#!/usr/bin/env bash
# The demo behind `make demo` (called from the repository root as
# `scripts/demo.sh --build build`: first the setup and a quiet build of build/,
# its output in build/build.log; or as `scripts/demo.sh build/obcache` for a
# binary already built). It captures one Needle-in-a-Haystack trace of the embedded
# default model (SmolLM2-135M-Instruct), checks it, analyses it with the paper's
# settings (top-40 recall, window sweep, with and without a recent window,
# recall against oracle@1, the paper's first-decode-step oracle, and oracle@T,
# summed over every captured decode step), renders the figures, replays the
# eviction of every policy with the model (both oracles and decode_attn among
# them), and writes a summary table and an index.html that shows every figure
# with the exact commands that made it. Everything lands in one folder,
# demo-out/ (git-ignored). One line per stage on the terminal ("demo: [3/9]
# capture: ..."), each stage's output in a log of demo-out/ (named if the stage
# fails), then the summary table.
#
# Settings (environment): DEMO_OUT (demo-out), DEMO_LENGTH (4096 tokens),
# DEMO_DEPTH (50 %), DEMO_HAYSTACK (kjv: the King James Bible; or noise, or a
# text file), DEMO_SEED (1), DEMO_RECENT (8), DEMO_THREADS (all cores), DEMO_REPLAY_MODEL (1 =
# replay sweep with the model in the loop; 0 = offline only, quicker, and no
# eval), DEMO_EVAL_TASKS (niah_single_1,niah_single_2,niah_multikey_1),
# DEMO_EVAL_SAMPLES (6), DEMO_EVAL_LENGTH (2048). With --build: JOBS (nproc) and
# CMAKE_FLAGS (none), as for `make build`.
set -Eeuo pipefail

BUILD_DIR=
if [ "${1:-}" = --build ]; then
  BUILD_DIR=${2:?usage: scripts/demo.sh --build BUILD_DIR | scripts/demo.sh [OBCACHE]}
  OBCACHE=$BUILD_DIR/obcache
else
  OBCACHE=${1:-build/obcache}
fi
OUT=${DEMO_OUT:-demo-out}
LENGTH=${DEMO_LENGTH:-4096}
DEPTH=${DEMO_DEPTH:-50}
HAYSTACK=${DEMO_HAYSTACK:-kjv}
SEED=${DEMO_SEED:-1}
RECENT=${DEMO_RECENT:-8}
THREADS=()                             # DEMO_THREADS=N: pass --threads N
[ -n "${DEMO_THREADS:-}" ] && THREADS=(--threads "$DEMO_THREADS")
MAIN_W=64                              # the main perturbation window
MAIN_K=40                              # the paper's top-40 budget
WINDOWS=$MAIN_W,1,2,4,8,16,32,128      # first = main; up to the 128 captured rows
EVAL_TASKS=${DEMO_EVAL_TASKS:-niah_single_1,niah_single_2,niah_multikey_1}
EVAL_SAMPLES=${DEMO_EVAL_SAMPLES:-6}
EVAL_LENGTH=${DEMO_EVAL_LENGTH:-2048}
EVAL_NEW_TOKENS=16 # answer tokens, the prefill's first (15 decode steps); these answers fit
# Budgets: analyze's default, k = 40 (main) and the curve 1, 2, 5, ..., 100
# (budgets k <= the recent window get r = 0 only).

# OpenMP threads sleep instead of spinning while they wait: on a machine
# shared with other jobs, spinning threads starve each other (decoding was
# measured 20x slower that way on 2 busy cores); results do not depend on it.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

TRACE=$OUT/trace.h5
MARKER=$OUT/.obcache-demo

die() { echo "demo: error: $*" >&2; exit 1; }

# --- stages, timing and the command log ------------------------------------
STAGE="start-up"
STAGE_LOG=
T_START=$EPOCHREALTIME
STAGE_NAMES=()
STAGE_SECONDS=()
FAILED=0
# failed: the stage, the tail of its log and the log's name.
failed() {
  [ "$FAILED" = 1 ] && return
  FAILED=1
  if [ -s "$STAGE_LOG" ]; then
    echo "demo: the last lines of $STAGE_LOG:" >&2
    tail -n 20 "$STAGE_LOG" | sed 's/^/  /' >&2
  fi
  echo "demo: FAILED during stage \"$STAGE\" (see the message above${STAGE_LOG:+; its whole output: $STAGE_LOG}); partial outputs are in $OUT/" >&2
}
trap failed ERR

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# The stages in order, counted before the first runs ("[3/9]"): setup and
# build (with --build), capture, verify, analyse, figures, replay, presets,
# and eval with the model in the loop.
N_STAGES=6
[ -n "$BUILD_DIR" ] && N_STAGES=$((N_STAGES + 2))
[ "${DEMO_REPLAY_MODEL:-1}" = 1 ] && N_STAGES=$((N_STAGES + 1))

# stage NAME FUNCTION LOG: prints "demo: [I/N] NAME", runs FUNCTION (which
# writes its output to LOG) and records its wall time.
stage() {
  STAGE=$1
  STAGE_LOG=$3
  echo "demo: [$((${#STAGE_NAMES[@]} + 1))/$N_STAGES] $1"
  local t0=$EPOCHREALTIME
  "$2"
  local s
  s=$(elapsed "$t0" "$EPOCHREALTIME")
  STAGE_NAMES+=("$1")
  STAGE_SECONDS+=("$s")
}

# run CMD...: logs the command (shell-quoted, as run from the repository root)
# to $OUT/commands.sh, then runs it.
run() {
  local a line=""
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./,=:%@+-]+$ ]]; then line+=" $a"; else line+=" '${a//\'/\'\\\'\'}'"; fi
  done
  printf '%s\n' "${line# }" >> "$OUT/commands.sh"
  "$@"
}

# --- preconditions ----------------------------------------------------------
[[ $LENGTH =~ ^[1-9][0-9]*$ ]] || die "DEMO_LENGTH must be a number of tokens, found '$LENGTH'"
if [ -e "$OUT" ] && [ ! -e "$MARKER" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  die "$OUT exists and was not written by this demo; move it away or set DEMO_OUT"
fi
rm -rf "$OUT"
mkdir -p "$OUT"
: > "$MARKER"
printf '# Commands run by scripts/demo.sh (from the repository root), in order.\n' > "$OUT/commands.sh"

echo "demo: SmolLM2-135M-Instruct, $LENGTH-token NIAH prompt ($HAYSTACK haystack), needle at ${DEPTH}%, seed $SEED -> $OUT/"

# --- 0. setup and build (--build) -----------------------------------------------
setup() {
  scripts/setup.sh
}
build() {
  local flags
  read -ra flags <<< "${CMAKE_FLAGS:-}"
  mkdir -p "$BUILD_DIR"
  { cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "${flags[@]}" &&
    cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"; } > "$BUILD_DIR/build.log" 2>&1
}

# --- 1. capture ---------------------------------------------------------------
capture() {
  run "$OBCACHE" capture --length "$LENGTH" --depth "$DEPTH" --haystack "$HAYSTACK" \
    --seed "$SEED" --rows 128 --decode 16 "${THREADS[@]}" -o "$TRACE" > "$OUT/capture.log"
}

# --- 2. verify and describe the trace ----------------------------------------
check() {
  run "$OBCACHE" verify "$TRACE" > "$OUT/verify.log"
  run "$OBCACHE" info "$TRACE" > "$OUT/info.txt"
}

# --- 3. analyse with the paper's settings --------------------------------------
analyse() {
  run "$OBCACHE" analyze "$TRACE" -o "$OUT/analysis" --window "$WINDOWS" \
    --recent "$RECENT" --oracle 1 "${THREADS[@]}" --scores-out "$OUT/scores.h5" \
    > "$OUT/analyze.log"
}

# --- 4. figures -----------------------------------------------------------------
figures() {
  run "$OBCACHE" plot "$OUT/analysis" -o "$OUT/plots" --format png,svg > "$OUT/plot.log"
}

# === REPLAY SECTION (needle retrieval and KL against the budget) =============
# Owner: the replay engineer. Contract with the rest of this script: write
# everything under $OUT/replay/; index.html then shows
#   - $OUT/replay/table.txt (if present) as a preformatted table,
#   - every $OUT/replay/plots/*.png, captioned by the line "NAME<TAB>caption"
#     of $OUT/replay/captions.tsv (if present),
# and commands logged with `run` appear in the command list. Return non-zero
# (or let a command fail) to stop the demo with a message.
#
# By default the sweep runs the model in the loop (needle retrieval by the
# replayed answer, teacher-forced KL, plus the offline output error and
# needle-span retention) over replay's default 11 policies (the analyser's
# quantities, recency, random, oracle@1, oracle@T, decode_attn) x 6 budgets:
# about 4 s per cell at 4096 tokens on 2 cores. DEMO_REPLAY_MODEL=0 keeps it
# offline only (no model; about 1.5 minutes).
replay() {
  mkdir -p "$OUT/replay"
  local model_flag=(--no-model)
  [ "${DEMO_REPLAY_MODEL:-1}" = 1 ] && model_flag=()
  # Every policy keeps the attention sinks and the same recent window as the
  # analysis (the paper's H2O-style split); recency is then StreamingLLM's rule.
  # Query-aware: the scores' window is the analysis's, the question in it.
  run "$OBCACHE" replay --sweep "$TRACE" "${model_flag[@]}" "${THREADS[@]}" --protocol aware \
    --recent "$RECENT" --sinks 4 -o "$OUT/replay" > "$OUT/replay/table.txt"
  run "$OBCACHE" plot "$OUT/replay" -o "$OUT/replay/plots" --format png,svg > "$OUT/replay/plot.log"
  printf '%s\t%s\n' \
    replay_needle "Does the model still find the needle when each score chooses what to keep? Share of answers with the needle's value (model replay) and share of the needle span kept, against the budget." \
    replay_kl "What does eviction cost the next-token distribution and the attention outputs? Teacher-forced KL(full || evicted) (model replay) and offline relative output error, against the budget." \
    replay_kl_steps "Which answer token breaks? Teacher-forced KL(full || evicted) at each decode step, one panel per budget." \
    > "$OUT/replay/captions.tsv"
}
# The paper's comparison: H2O (the H2O paper's, h2o, and kvpress's,
# observed-attention), TOVA, SnapKV and AdaKV as kvpress runs them
# (presets), each against itself with OBCache's obc_vk inside, under both
# query protocols (docs/SCIENCE.md, "Methods as presets" and "Paired sweep").
# Writes $OUT/presets/ (table.txt: the printed tables, replay_pairs.csv).
presets() {
  mkdir -p "$OUT/presets"
  local model_flag=(--no-model)
  [ "${DEMO_REPLAY_MODEL:-1}" = 1 ] && model_flag=()
  run "$OBCACHE" replay --sweep "$TRACE" "${model_flag[@]}" "${THREADS[@]}" \
    --pairs h2o+obc_vk,observed-attention+obc_vk,tova+obc_vk,snapkv+obc_vk,adakv-snapkv+obc_vk \
    --budgets 2%,5%,10%,20%,40% --protocol agnostic,aware -o "$OUT/presets" \
    > "$OUT/presets/table.txt"
}
# Task accuracy over many samples (docs/SCIENCE.md, "Task accuracy"): RULER's
# niah_single_1, niah_single_2 (the KJV as its essay) and niah_multikey_1, 6
# samples each at 2048 tokens; SnapKV and TOVA (kvpress's presets) each
# against itself with OBCache's score inside, at 10/25/50%,
# under the query-agnostic protocol, with oracle@T as the answer-aware
# reference. Writes $OUT/eval/ (accuracy.csv, paired.csv, recall.csv,
# samples.csv, eval.json, plots/ with index.html; table.txt: the printed
# tables).
evaluate() {
  mkdir -p "$OUT/eval"
  run "$OBCACHE" eval "${THREADS[@]}" --tasks "$EVAL_TASKS" --samples "$EVAL_SAMPLES" \
    --length "$EVAL_LENGTH" --pairs snapkv+obc_k,tova+obc_vk --budgets 10%,25%,50% \
    --protocol agnostic --max-new-tokens "$EVAL_NEW_TOKENS" -o "$OUT/eval" \
    > "$OUT/eval/table.txt"
}
# === END OF REPLAY SECTION =====================================================

if [ -n "$BUILD_DIR" ]; then
  stage "setup: what is missing of the Debian packages and the default model" setup ""
  stage "build: CMake Release in $BUILD_DIR/ (output in $BUILD_DIR/build.log)" build "$BUILD_DIR/build.log"
fi
[ -x "$OBCACHE" ] || die "$OBCACHE is not an executable (build first: make build)"
command -v gnuplot >/dev/null || die "gnuplot not found on PATH (install gnuplot-nox; make demo does it)"
stage "capture: $LENGTH-token NIAH prompt, prefill and 16 decode steps" capture "$OUT/capture.log"
stage "verify: recompute lse and O of the trace from Q, K, V" check "$OUT/verify.log"
stage "analyse: recall@k of oracle@1 and oracle@T, windows $WINDOWS, recent 0 and $RECENT" \
  analyse "$OUT/analyze.log"
stage "figures: gnuplot, PNG and SVG" figures "$OUT/plot.log"
if [ "${DEMO_REPLAY_MODEL:-1}" = 1 ]; then
  stage "replay: the model with each score's cache, needle retrieval and KL per budget" \
    replay "$OUT/replay/table.txt"
else
  stage "replay, offline: output error and needle span kept per score and budget" \
    replay "$OUT/replay/table.txt"
fi
stage "presets: the field's methods, baseline vs baseline + OBCache, both protocols" \
  presets "$OUT/presets/table.txt"
if [ "${DEMO_REPLAY_MODEL:-1}" = 1 ]; then
  stage "eval: task accuracy over $EVAL_SAMPLES samples each of $EVAL_TASKS" \
    evaluate "$OUT/eval/table.txt"
fi

# --- 5. summary table ------------------------------------------------------------
# replay_digest: per policy, the smallest budget from which every larger one
# has the needle in its replayed answer, the share of the value's characters
# reproduced from its start and the teacher-forced KL at three budgets (from
# replay/replay_sweep.csv).
replay_digest() {
  local csv=$OUT/replay/replay_sweep.csv
  [ -s "$csv" ] && [ "${DEMO_REPLAY_MODEL:-1}" = 1 ] || return 0
  echo
  echo "replay with the model (every policy keeps 4 sinks and the last $RECENT positions;"
  echo "found = smallest budget from which the answer has the needle at every larger budget,"
  echo "prefix = share of the value's digits reproduced from its start, KL = teacher-forced"
  echo "KL(full || evicted), mean over the decode steps):"
  awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { s = $col["score"]; b = $col["budget"]
      if (!(s in seen)) { seen[s] = 1; order[++n] = s }
      if (!(b in bseen)) { bseen[b] = 1; budgets[++nb] = b }
      found[s, b] = $col["needle_found"]; prefix[s, b] = $col["needle_prefix_share"]
      kl[s, b] = $col["kl_forced"] }
    END {
      pick[1] = budgets[nb >= 3 ? 2 : 1]; pick[2] = budgets[nb >= 4 ? 4 : nb]; pick[3] = budgets[nb]
      printf "  %-12s %7s", "score", "found"
      for (j = 1; j <= 3; j++) printf " %11s", "prefix@" pick[j]
      for (j = 1; j <= 3; j++) printf " %9s", "KL@" pick[j]
      printf "\n"
      for (i = 1; i <= n; i++) {
        s = order[i]; first = "-"
        for (j = nb; j >= 1; j--) if (found[s, budgets[j]] + 0 >= 0.5) first = budgets[j]; else break
        printf "  %-12s %7s", s, first
        for (j = 1; j <= 3; j++) printf " %11.2f", prefix[s, pick[j]]
        for (j = 1; j <= 3; j++) printf " %9.4f", kl[s, pick[j]]
        printf "\n"
      }
    }' "$csv"
}

STAGE="summary table and index.html"
STAGE_LOG=
ANSWER=$(awk '/^answer: "/ { on = 1; sub(/^answer: "/, "") }
              on && /^needle (found|not found) \(expected / { exit }
              on { lines = lines (n++ ? "\\n" : "") $0 }
              END { sub(/"$/, "", lines); print lines }' "$OUT/capture.log")
FOUND_LINE=$(grep -E '^needle (found|not found) \(expected ' "$OUT/capture.log") \
  || die "$OUT/capture.log has no 'needle found/not found' line"
FOUND=$(sed -E 's/^needle (found|not found) .*/\1/' <<< "$FOUND_LINE")
EXPECTED=$(sed -E 's/.*\(expected (.*)\)$/\1/' <<< "$FOUND_LINE")
MODEL=$(sed -n 's/^model  *\([^(]*\) (.*/\1/p' "$OUT/info.txt" | sed 's/ *$//')
NEEDLE_SPAN=$(sed -n 's/.* needle  *\(\[[0-9]*, [0-9]*)\).*/\1/p' "$OUT/info.txt")

# score, recall vs oracle@1 (r=0, r=R), vs oracle@T (r=0, r=R), best window vs
# oracle@1 (r=0), recall there, needle kept (r=0)
awk -F, -v W="$MAIN_W" -v K="$MAIN_K" -v R="$RECENT" '
  function f(a, k) { return (k in a) ? sprintf("%.3f", a[k]) : "-" }
  FNR == 1 { next }
  FILENAME ~ /recall\.csv$/ && $4 == K && ($5 == "oracle@1" || $5 == "oracle@T") {
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    key = $1 SUBSEP $5
    if ($2 == W && $3 == 0) r0[key] = $6
    if ($2 == W && $3 == R) rr[key] = $6
    if ($5 == "oracle@1" && $3 == 0 && (!($1 in best) || $6 > best[$1])) { best[$1] = $6; bw[$1] = $2 }
  }
  FILENAME ~ /needle\.csv$/ && $4 == K && $2 == W && $3 == 0 { nk[$1] = $5 }
  END {
    for (i = 1; i <= n; i++) {
      s = order[i]
      printf "%s,%s,%s,%s,%s,%d,%.3f,%s\n", s, f(r0, s SUBSEP "oracle@1"), f(rr, s SUBSEP "oracle@1"),
             f(r0, s SUBSEP "oracle@T"), f(rr, s SUBSEP "oracle@T"), bw[s], best[s], f(nk, s)
    }
  }' "$OUT/analysis/recall.csv" "$OUT/analysis/needle.csv" > "$OUT/summary.csv"
[ -s "$OUT/summary.csv" ] || die "$OUT/analysis/recall.csv has no rows for window $MAIN_W, k $MAIN_K"

{
  echo "model    $MODEL (the embedded default, SmolLM2-135M-Instruct.Q4_1.gguf)"
  echo "prompt   $LENGTH tokens, $HAYSTACK haystack, needle at ${DEPTH}% (tokens $NEEDLE_SPAN), seed $SEED"
  echo "answer   \"$ANSWER\""
  echo "needle   $FOUND (expected $EXPECTED)"
  echo
  echo "recall@$MAIN_K (mean over 30 layers x 3 KV heads), window W = $MAIN_W, against oracle@1 (the"
  echo "paper's, first decode step) and oracle@T (every captured decode step):"
  printf '  %-9s %7s %7s %7s %7s  %7s %9s %12s\n' "" "@1" "@1" "@T" "@T" "best W" "recall" "needle"
  printf '  %-9s %7s %7s %7s %7s  %7s %9s %12s\n' score "r=0" "r=$RECENT" "r=0" "r=$RECENT" "(@1)" "there" "kept"
  while IFS=, read -r s a b c e w bv nk; do
    printf '  %-9s %7s %7s %7s %7s  %7s %9s %12s\n' "$s" "$a" "$b" "$c" "$e" "$w" "$bv" "$nk"
  done < "$OUT/summary.csv"
  echo "  r = the last r prompt positions always kept, k - r chosen by the score; best W ="
  echo "  the window of the highest recall@$MAIN_K against oracle@1 with r = 0; needle kept ="
  echo "  share of the needle span's tokens among the $MAIN_K kept (W = $MAIN_W, r = 0). exact_*"
  echo "  and remove are exact errors over the window (references), not cheap scores."
  replay_digest
} > "$OUT/summary.txt"

# --- 6. index.html ------------------------------------------------------------------
html_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'; }

caption_of() {
  case $1 in
    recall_window) echo "Which perturbation window W makes each score agree best with the true eviction error? recall@$MAIN_K against W, without (left) and with (right) the last $RECENT positions kept." ;;
    recall_k)      echo "How much of the oracle's top-k set does each score keep as the budget k grows? recall@k at W = $MAIN_W." ;;
    recall_oracles) echo "Does that depend on which decode steps the oracle looks at? recall@k against oracle@1 (left) and oracle@T (right), at W = $MAIN_W." ;;
    needle_k)      echo "Does the selection keep the needle? Share of the needle span's tokens each score keeps against k, at W = $MAIN_W." ;;
    recall_layers) echo "Which layers does each score get right? recall@$MAIN_K per layer and score at W = $MAIN_W." ;;
    taylor)        echo "Does each OBCache Taylor score track the exact error it approximates, and does the window's removal error track the true eviction error at decode?" ;;
    bias_share)    echo "Does a score pile its selection on early tokens (structural bias)? Share of the kept positions per relative-position bucket, oracle for reference." ;;
    bias_score)    echo "Where along the prompt does each score accumulate? Mean normalised score per relative-position bucket." ;;
    bias_windows)  echo "Does the structural bias grow with the window W? Selection shares for every W, one panel per score, oracle dashed." ;;
    *)             echo "$1" ;;
  esac
}

figure_html() {  # DIR NAME CAPTION
  local rel=${1#"$OUT"/}
  echo "<figure><a href=\"$rel/$2.svg\"><img src=\"$rel/$2.png\" alt=\"$2\"></a>"
  echo "<figcaption><b>$2</b>: $(html_escape <<< "$3")</figcaption></figure>"
}

TOTAL=$(elapsed "$T_START" "$EPOCHREALTIME")
{
  cat <<EOF
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>obcache demo: $(html_escape <<< "$MODEL"), $LENGTH tokens</title>
<style>
body { font-family: sans-serif; max-width: 1400px; margin: 2em auto; padding: 0 1em; }
figure { margin: 2em 0; } img { max-width: 100%; border: 1px solid #ddd; }
figcaption { margin-top: .3em; } pre { background: #f6f6f6; padding: .8em; overflow-x: auto; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: .2em .6em; text-align: right; }
td:first-child, th:first-child { text-align: left; }
</style></head><body>
<h1>obcache demo</h1>
<p>One Needle-in-a-Haystack trace of SmolLM2-135M-Instruct, analysed offline: for every
(layer, KV head), which prompt tokens does each eviction score keep, and how many of them
are among the $MAIN_K tokens whose eviction would really perturb the first decoding step
(oracle@1) or the whole answer (oracle@T), and what does the model lose when the rest are
dropped? Made by <code>scripts/demo.sh</code> with $("$OBCACHE" version 2>/dev/null | html_escape || echo obcache)
on $(date -u '+%Y-%m-%d %H:%M UTC'), in $TOTAL s.</p>
<h2>Summary</h2>
<pre>$(head -4 "$OUT/summary.txt" | html_escape)</pre>
<p>recall@$MAIN_K, mean over 30 layers x 3 KV heads, window W = $MAIN_W, against oracle@1
(the first decode step) and oracle@T (every captured decode step):</p>
<table><tr><th>score</th><th>oracle@1, r=0</th><th>oracle@1, r=$RECENT</th>
<th>oracle@T, r=0</th><th>oracle@T, r=$RECENT</th>
<th>best W (oracle@1, r=0)</th><th>recall@$MAIN_K there</th><th>needle kept (r=0)</th></tr>
EOF
  while IFS=, read -r s a b c e w bv nk; do
    echo "<tr><td>$s</td><td>$a</td><td>$b</td><td>$c</td><td>$e</td><td>$w</td><td>$bv</td><td>$nk</td></tr>"
  done < "$OUT/summary.csv"
  echo "</table>"
  echo "<p>$(sed -n '/^  r = the last/,/^  and remove/p' "$OUT/summary.txt" | html_escape)</p>"
  grep -q '^replay with the model' "$OUT/summary.txt" &&
    echo "<pre>$(sed -n '/^replay with the model/,$p' "$OUT/summary.txt" | html_escape)</pre>"
  echo "<p>Per-head, per-layer and"
  echo "per-window numbers: <a href=\"analysis/\">analysis/</a> (report.json and CSVs);"
  echo "every per-token score and error at W = $MAIN_W: <code>scores.h5</code>; the trace: <code>trace.h5</code>"
  echo "(<a href=\"info.txt\">obcache info</a>, <a href=\"verify.log\">obcache verify</a>).</p>"
  echo "<h2>Figures</h2>"
  echo "<p>Click a figure for its SVG. The gnuplot scripts are in <code>plots/*.gp</code> of the repository.</p>"
  shown=" "
  for name in recall_window recall_k recall_oracles needle_k recall_layers taylor bias_share bias_score bias_windows; do
    if [ -s "$OUT/plots/$name.png" ]; then
      figure_html "$OUT/plots" "$name" "$(caption_of "$name")"
      shown+="$name "
    fi
  done
  for png in "$OUT"/plots/*.png; do
    name=$(basename "$png" .png)
    [[ $shown == *" $name "* ]] || figure_html "$OUT/plots" "$name" "$(caption_of "$name")"
  done
  echo "<!-- REPLAY SECTION BEGIN (filled from $OUT/replay/ by the replay stage of demo.sh) -->"
  echo "<h2>Replay: what the model loses</h2>"
  if [ -d "$OUT/replay" ]; then
    [ -s "$OUT/replay/table.txt" ] && echo "<pre>$(html_escape < "$OUT/replay/table.txt")</pre>"
    [ -s "$OUT/presets/table.txt" ] &&
      echo "<h3>The field's methods, with OBCache's score inside</h3><pre>$(html_escape < "$OUT/presets/table.txt")</pre>"
    [ -s "$OUT/eval/table.txt" ] &&
      echo "<h3>Task accuracy over many samples</h3><p><a href=\"eval/plots/index.html\">the eval's page</a> (figures, tables)</p><pre>$(html_escape < "$OUT/eval/table.txt")</pre>"
    for png in "$OUT"/replay/plots/*.png; do
      [ -e "$png" ] || continue
      name=$(basename "$png" .png)
      cap=$name
      [ -s "$OUT/replay/captions.tsv" ] && cap=$(awk -F'\t' -v n="$name" '$1 == n { print $2 }' "$OUT/replay/captions.tsv")
      figure_html "$OUT/replay/plots" "$name" "${cap:-$name}"
    done
  else
    echo "<p>Not run: this build of obcache has no <code>replay --sweep</code>.</p>"
  fi
  echo "<!-- REPLAY SECTION END -->"
  echo "<h2>Commands</h2>"
  echo "<p>Run from the repository root; each figure and number above comes from these.</p>"
  echo "<pre>$(grep -v '^#' "$OUT/commands.sh" | html_escape)</pre>"
  echo "<h2>Wall time per stage</h2><table><tr><th>stage</th><th>seconds</th></tr>"
  for i in "${!STAGE_NAMES[@]}"; do
    echo "<tr><td>$(html_escape <<< "${STAGE_NAMES[$i]}")</td><td>${STAGE_SECONDS[$i]}</td></tr>"
  done
  echo "<tr><td><b>total</b></td><td><b>$TOTAL</b></td></tr></table>"
  echo "<p>Machine: $(nproc) cores; $(uptime | sed 's/.*load average/load average/')</p>"
  echo "</body></html>"
} > "$OUT/index.html.tmp"
mv "$OUT/index.html.tmp" "$OUT/index.html"

echo
cat "$OUT/summary.txt"
echo
echo "wall time per stage:"
for i in "${!STAGE_NAMES[@]}"; do
  printf '  %7s s  %s\n' "${STAGE_SECONDS[$i]}" "${STAGE_NAMES[$i]}"
done
printf '  %7s s  total\n' "$(elapsed "$T_START" "$EPOCHREALTIME")"
echo
echo "demo: open $OUT/index.html (figures in $OUT/plots/, tables in $OUT/analysis/, commands in $OUT/commands.sh, each stage's output in $OUT/*.log and */table.txt)"
