#!/usr/bin/env bash
# `make install PREFIX=DIR` (cmake --install BUILD --prefix DIR): DIR/bin/obcache
# runs from any folder and reads what it needs at run time from
# DIR/share/obcache (common/obc_paths.h), not from the source tree: the figure
# scripts (obcache plot renders a figure from them) and the default model when
# the build tree's source has it (model-info loads it without OBC_MODEL); the
# CUDA backend lands in DIR/lib when the build has one. The installed tree
# still works when moved as a whole.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_SOURCE_DIR:?}" "${OBC_TMP:?}"
scratch install
BUILD=$(cd "$(dirname "$OBCACHE")" && pwd)
PREFIX=$dir/prefix
# Nothing of the environment that points at the source tree.
unset OBC_MODEL OBC_PLOTS_DIR

cmake --install "$BUILD" --prefix "$PREFIX" > "$dir/install.log" 2>&1 ||
  fatal "cmake --install $BUILD --prefix $PREFIX failed: $(tail -3 "$dir/install.log")"
check "installed bin/obcache" test -x "$PREFIX/bin/obcache"
n_scripts=$(find "$OBC_SOURCE_DIR/plots" -maxdepth 1 -name '*.gp' | wc -l)
n_installed=$(find "$PREFIX/share/obcache/plots" -maxdepth 1 -name '*.gp' | wc -l)
check "every plots/*.gp installed ($n_installed of $n_scripts)" \
  test "$n_scripts" -gt 0 -a "$n_installed" -eq "$n_scripts"
if [ -e "$BUILD/libobcache_cuda.so" ]; then
  check "the CUDA backend installed in lib/" test -f "$PREFIX/lib/libobcache_cuda.so"
fi

mkdir -p "$dir/elsewhere"
cd "$dir/elsewhere" || fatal "cd $dir/elsewhere"
"$PREFIX/bin/obcache" version > "$dir/version.txt" 2>&1
check "bin/obcache version runs from another folder" \
  grep -q "^obcache [0-9]" "$dir/version.txt"
"$PREFIX/bin/obcache" plot --help > "$dir/help.txt" 2>&1
check "plot reads its scripts from share/obcache/plots" \
  grep -qF "The gnuplot scripts are read from $PREFIX/share/obcache/plots" "$dir/help.txt"

# plot_from PREFIX NAME: renders the recall_k figure of a fixture folder.
plot_from() {
  python3 "$OBC_SOURCE_DIR/tests/plots_fixture.py" analysis "$dir/$2" > /dev/null ||
    fatal "plots fixture"
  if "$1/bin/obcache" plot "$dir/$2" --only recall_k --format png > "$dir/$2.out" 2> "$dir/$2.err" &&
    is_png "$dir/$2/plots/recall_k.png"; then
    pass "$2: plot renders recall_k.png with the installed scripts"
  else
    fail "$2: plot failed: $(cat "$dir/$2.err")"
  fi
}
if command -v gnuplot > /dev/null; then
  plot_from "$PREFIX" analysis
else
  echo "SKIP (plot): gnuplot not on PATH"
fi

if [ -f "$PREFIX/share/obcache/models/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
  "$PREFIX/bin/obcache" model-info --no-load > "$dir/model.txt" 2>&1
  check "model-info finds the installed default model" \
    grep -qxF "model: $PREFIX/share/obcache/models/SmolLM2-135M-Instruct.Q4_1.gguf" "$dir/model.txt"
else
  echo "SKIP (default model): none installed (the source tree has no models/; scripts/setup.sh)"
fi

# Moved as a whole, the tree reads its own share/obcache.
mv "$PREFIX" "$dir/moved"
"$dir/moved/bin/obcache" plot --help > "$dir/help.txt" 2>&1
check "a moved tree reads its own share/obcache/plots" \
  grep -qF "The gnuplot scripts are read from $dir/moved/share/obcache/plots" "$dir/help.txt"
if command -v gnuplot > /dev/null; then plot_from "$dir/moved" moved_analysis; fi
finish
