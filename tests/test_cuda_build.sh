#!/bin/bash
# The CUDA backend builds where nvcc exists (libobcache_cuda.so beside
# obcache, which loads it only for --device cuda: obcache itself does not
# link the CUDA libraries), and `obcache generate --device cuda` without a
# usable GPU fails with a one-line message and a non-zero exit, no crash:
# "no CUDA device found" in a CUDA build, "this build has no CUDA support" in
# a CPU-only build.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?set OBCACHE to the obcache binary}"
build_dir=$(dirname "$OBCACHE")

cuda_on=$(grep -E '^OBC_CUDA:BOOL=' "$build_dir/CMakeCache.txt" 2>/dev/null | cut -d= -f2)
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ "$cuda_on" = "ON" ]; then
    lib="$build_dir/libobcache_cuda.so"
    [ -f "$lib" ] || fatal "nvcc exists and OBC_CUDA=ON, but $lib was not built"
    for sym in runtime_backend_cuda runtime_backend_cuda_bf16 cuda_backend_probe; do
      nm -D --defined-only "$lib" | grep -qw "$sym" || fatal "$lib does not export $sym"
    done
    # Loaded on demand: a CPU run does not load the CUDA runtime or cuBLAS.
    ! ldd "$OBCACHE" | grep -E -q 'libcudart|libcublas' ||
      fatal "$OBCACHE links the CUDA libraries itself (they belong to $lib)"
    echo "CUDA backend built: $lib ($(ldd "$lib" | grep -Eo 'libcu[a-zA-Z]*\.so[.0-9]*' | tr '\n' ' '))"
  else
    echo "skipped: nvcc exists but this build was configured with -DOBC_CUDA=OFF"
  fi
else
  echo "skipped: no nvcc on this machine (CPU-only build)"
fi

if [ "$cuda_on" = "ON" ]; then expect="no CUDA device"; else expect="this build has no CUDA support"; fi
out=$("$OBCACHE" generate --device cuda --prompt "Hello" --max-new-tokens 1 2>&1 >/dev/null)
rc=$?
if [ "$cuda_on" = "ON" ] && [ $rc -eq 0 ]; then
  echo "skipped: a CUDA device is present here (generate --device cuda ran); tests/gpu/run.sh checks it"
  exit 0
fi
[ $rc -ne 0 ] || fatal "generate --device cuda succeeded without a device"
[ $rc -lt 128 ] || fatal "generate --device cuda crashed (exit $rc): $out"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fatal "expected a one-line error, got: $out"
printf '%s\n' "$out" | grep -q -- "--device cuda: $expect" || fatal "expected '--device cuda: $expect', got: $out"
echo "generate --device cuda: exit $rc, '$out'"
finish
