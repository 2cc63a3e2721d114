#!/usr/bin/env bash
# Builds the GPU kit on an ordinary machine (no GPU needed, nvcc needed): the
# CUDA build of obcache and the programs of tests/gpu/ for sm_80 and sm_90 on
# a generic x86-64 target (OBC_NATIVE=OFF: the GPU machine's processor is
# another), with every shared library they need that a bare CUDA machine
# lacks, so that one device call runs every GPU check (docs/GPU.md).
#
#   KIT/run.sh            unpacks the payload (into $TMPDIR) and runs its run.sh
#   KIT/payload.tar.gz    obcache-gpu-kit/: bin/ (obcache, gpu_ops, gpu_runtime,
#                         gpu_bench), lib/ (the libraries, resolved with ldd),
#                         run.sh (tests/gpu/kit_run.sh: the checks in order),
#                         random.gguf (a 7 MB random-weight model with SmolLM2's
#                         tokenizer, tests/make_random_gguf.py kit),
#                         compare_reports.py, compare_replays.py, libs.txt (what was bundled, from where)
#
# Left out of lib/ (a CUDA machine has them): glibc (libc, libm, libdl,
# libpthread, librt, libresolv, ld-linux), libstdc++ and libgcc_s, the CUDA
# driver (libcuda) and cuBLAS (libcublas, libcublasLt: 580 MB; the kit's
# run.sh finds the machine's copy of the same major version).
#
# usage: scripts/gpu-kit.sh [KIT_DIR]      (default: gpu-kit, git-ignored)
# env:   BUILD (default build-kit), JOBS (default 2), OBC_CUDA_ARCHS (default "80;90"),
#        OBC_MODEL (the GGUF whose tokenizer the random model takes; default SmolLM2)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
kit=${1:-$src/gpu-kit}
build=${BUILD:-$src/build-kit}
limit_mib=60

command -v nvcc >/dev/null || PATH=$PATH:/usr/local/cuda/bin
command -v nvcc >/dev/null || { echo "gpu-kit: nvcc not found (install the CUDA toolkit)" >&2; exit 3; }

cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DOBC_NATIVE=OFF -DOBC_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${OBC_CUDA_ARCHS:-80;90}" > /dev/null
cmake --build "$build" -j "${JOBS:-2}" --target obcache gpu_ops gpu_runtime gpu_bench > /dev/null

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/obcache-gpu-kit
mkdir -p "$root/bin" "$root/lib"
binaries=("$build/obcache" "$build/tests/gpu/gpu_ops" "$build/tests/gpu/gpu_runtime"
          "$build/tests/gpu/gpu_bench")
for b in "${binaries[@]}"; do
  cp "$b" "$root/bin/"
  strip --strip-unneeded "$root/bin/$(basename "$b")"
done

# system_library NAME: whether a bare CUDA machine has NAME (see the header).
system_library() {
  case $1 in
    linux-vdso.so.* | ld-linux-x86-64.so.* | libc.so.* | libm.so.* | libdl.so.* | \
      libpthread.so.* | librt.so.* | libresolv.so.* | libstdc++.so.* | libgcc_s.so.* | \
      libcuda.so.* | libcublas.so.* | libcublasLt.so.* | libnvidia-*) return 0 ;;
    *) return 1 ;;
  esac
}

: > "$root/libs.txt"
for b in "${binaries[@]}"; do
  ldd "$b" | while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    system_library "$name" && continue
    [ -f "$path" ] || { echo "gpu-kit: $b needs $name, which ldd cannot find" >&2; exit 1; }
    if [ ! -e "$root/lib/$name" ]; then
      cp -L "$path" "$root/lib/$name"
      strip --strip-unneeded "$root/lib/$name" 2> /dev/null || true
      echo "$name $path" >> "$root/libs.txt"
    fi
  done
done
model=${OBC_MODEL:-$src/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$model" ] || { echo "gpu-kit: $model (the tokenizer of the kit's model) not found" >&2; exit 1; }
python3 "$src/tests/make_random_gguf.py" kit Q8_0 "$model" "$root/random.gguf" > /dev/null
cp "$src/tests/gpu/kit_run.sh" "$root/run.sh"
cp "$src/tests/gpu/compare_reports.py" "$src/tests/gpu/compare_replays.py" "$root/"
chmod +x "$root/run.sh"

rm -rf "$kit"
mkdir -p "$kit"
tar -czf "$kit/payload.tar.gz" -C "$stage" obcache-gpu-kit
cat > "$kit/run.sh" << 'EOF'
#!/usr/bin/env bash
# The GPU kit's entry point (made by scripts/gpu-kit.sh): unpacks the payload
# into $TMPDIR (default /tmp) and runs its run.sh with the same arguments;
# results go to $OUT (default ./gpu-results). See docs/GPU.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=$(mktemp -d "${TMPDIR:-/tmp}/obcache-gpu-kit.XXXXXX")
tar -xzf "$here/payload.tar.gz" -C "$dest"
exec "$dest/obcache-gpu-kit/run.sh" "$@"
EOF
chmod +x "$kit/run.sh"

bytes=$(du -sb "$kit" | cut -f1)
unpacked=$(du -sb "$root" | cut -f1)
printf 'gpu-kit: %s: %.1f MiB (unpacked %.1f MiB): %d programs, %d libraries\n' "$kit" \
  "$(echo "$bytes / 1048576" | bc -l)" "$(echo "$unpacked / 1048576" | bc -l)" \
  "${#binaries[@]}" "$(wc -l < "$root/libs.txt")"
if [ "$bytes" -gt $((limit_mib * 1048576)) ]; then
  echo "gpu-kit: the kit is over $limit_mib MiB (a device call carries 64 MiB with the tree)" >&2
  exit 1
fi
