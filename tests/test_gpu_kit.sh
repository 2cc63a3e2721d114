#!/usr/bin/env bash
# The GPU kit is self-contained (scripts/gpu-kit.sh; docs/GPU.md). Builds
# it (the CUDA build for sm_80 and sm_90, generic x86-64) and checks that
#   - it is under 60 MiB, so that one device call carries it with the tree;
#   - every library its programs need resolves, with only the kit's lib/ on
#     the search path, either inside the kit or to one of the libraries a
#     CUDA machine has (glibc, libstdc++, libgcc_s, the driver, cuBLAS);
#   - in a chroot that holds the kit and only those system libraries (no
#     HDF5, cJSON, PCRE2, OpenBLAS, libgomp, ... of this machine), the kit's
#     obcache prints its version and runs a CPU capture-free pipeline:
#     synth, verify, analyze;
#   - the kit's run.sh completes its dry run here (GPU steps skipped, the CPU
#     capture of the kit's random model, its verify and analysis run).
# Skipped without nvcc (the CPU-only build has no kit). Needs root for the
# chroot part, which is skipped (saying so) where chroot is not permitted.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBC_TMP:?}" "${OBC_SOURCE_DIR:?}"
PATH=$PATH:/usr/local/cuda/bin
command -v nvcc > /dev/null || { echo "SKIP: nvcc not found (no CUDA toolkit, no kit)"; exit 0; }
scratch gpu_kit

BUILD=${OBC_KIT_BUILD:-$dir/build} "$OBC_SOURCE_DIR/scripts/gpu-kit.sh" "$dir/kit" > "$dir/build.log" 2>&1
rc=$?
tail -3 "$dir/build.log"
[ $rc -eq 0 ] || fatal "scripts/gpu-kit.sh (exit $rc)"
bytes=$(du -sb "$dir/kit" | cut -f1)
check "the kit is under 60 MiB ($((bytes / 1048576)) MiB)" test "$bytes" -lt $((60 * 1048576))

mkdir -p "$dir/unpacked"
tar -xzf "$dir/kit/payload.tar.gz" -C "$dir/unpacked"
kit=$dir/unpacked/obcache-gpu-kit
system='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libnvidia-.*)\.so'
resolved_in_kit() { # BINARY: every non-system library resolves inside the kit
  LD_LIBRARY_PATH=$kit/lib ldd "$1" | awk -v kit="$kit/lib/" -v sys="$system" '
    $2 == "=>" && $1 !~ sys && index($3, kit) != 1 { print "  " $1 " -> " $3; bad = 1 }
    /not found/ { print "  " $0; bad = 1 }
    END { exit bad }'
}
for b in "$kit"/bin/*; do
  check "$(basename "$b"): every library resolves in the kit or is a CUDA machine's" \
    resolved_in_kit "$b"
done

# A root holding the kit and the system libraries alone.
chroot_check() {
  local root=$dir/root lib
  mkdir -p "$root/kit" "$root/tmp" "$root/lib64" "$root/lib/x86_64-linux-gnu"
  cp -a "$kit/." "$root/kit/"
  LD_LIBRARY_PATH=$kit/lib ldd "$kit/bin/obcache" | awk '$2 == "=>" { print $1, $3 } $1 ~ /^\/lib64/ { print $1, $1 }' |
    while read -r name path; do
      [[ $name =~ $system ]] || [[ $name == /lib64/* ]] || continue
      lib=$root/lib/x86_64-linux-gnu/$(basename "$path")
      [[ $name == /lib64/* ]] && lib=$root$name
      ln "$(readlink -f "$path")" "$lib" 2> /dev/null || cp -L "$path" "$lib"
    done
  echo "chroot: $(ls "$root/lib/x86_64-linux-gnu" | tr '\n' ' ')"
  local run=(env -i OMP_WAIT_POLICY=passive LD_LIBRARY_PATH=/kit/lib "$(command -v chroot)" "$root")
  "${run[@]}" /kit/bin/obcache version > "$dir/chroot.txt" 2>&1 || { cat "$dir/chroot.txt"; return 1; }
  "${run[@]}" /kit/bin/obcache synth -o /tmp/t.h5 >> "$dir/chroot.txt" 2>&1 &&
    "${run[@]}" /kit/bin/obcache verify /tmp/t.h5 >> "$dir/chroot.txt" 2>&1 &&
    "${run[@]}" /kit/bin/obcache analyze /tmp/t.h5 -o /tmp/a >> "$dir/chroot.txt" 2>&1 &&
    test -s "$root/tmp/a/report.json" || { cat "$dir/chroot.txt"; return 1; }
}
if [ "$(id -u)" = 0 ] && chroot / true 2> /dev/null; then
  check "in a chroot without this machine's libraries: version, synth, verify, analyze" chroot_check
else
  echo "SKIP (chroot): not permitted here; the ldd checks above stand"
fi

OUT=$dir/results "$kit/run.sh" --dry-run > "$dir/dry.txt" 2>&1
rc=$?
tail -12 "$dir/dry.txt"
check "run.sh --dry-run passes" test $rc -eq 0
check "... and writes results.txt and results.json" \
  python3 -c "import json, sys; r = json.load(open('$dir/results/results.json')); sys.exit(r['verdict'] != 'PASS' or not r['dry_run'])"

finish
