#!/usr/bin/env python3
"""The Q and K rows of an `obcache capture` trace against the independent
reference (tests/reference_model.py): per layer, the cached keys of every
position and the captured query rows must equal the reference's q and k after
the Q/K norms (Qwen3) and RoPE, i.e. exactly what attention scores are
computed from. The model must rotate halves (qwen2/qwen3 GGUF, any HF folder),
the layout the reference computes in. Bound: max |C - ref| / max |ref| <= 1e-4
per layer and tensor, the fp32 bound of test_model_reference.py.

usage: compare_capture_qk.py TRACE.h5 MODEL LABEL (exit 1 on a mismatch)"""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_model  # noqa: E402

TOLERANCE = 1e-4


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    trace, model, label = sys.argv[1:]
    with h5py.File(trace, "r") as f:
        tokens = [int(t) for t in f["tokens"][()]]
        rows = f["row_positions"][()]
        n_layers = int(f.attrs["n_layers"])
        captured = [(f[f"layers/{l:03d}/Q"][()], f[f"layers/{l:03d}/K"][()])
                    for l in range(n_layers)]
    record = []
    reference_model.forward(reference_model.load(model), tokens, record=record)
    worst = 0.0
    for layer, ((q, k), (ref_q, ref_k)) in enumerate(zip(captured, record)):
        want_q = ref_q[:, rows, :]
        want_k = ref_k[:, :k.shape[1], :]
        for name, got, want in (("Q", q, want_q), ("K", k, want_k)):
            if got.shape != want.shape:
                print(f"FAIL {label}: layer {layer} {name} shape {got.shape}, reference {want.shape}")
                return 1
            rel = np.abs(got - want).max() / np.abs(want).max()
            worst = max(worst, rel)
            if not rel <= TOLERANCE:
                print(f"FAIL {label}: layer {layer} {name} max relative difference {rel:.3g} "
                      f"(bound {TOLERANCE:g})")
                return 1
    print(f"ok   {label}: captured Q ({len(rows)} rows) and K ({len(tokens)} positions) of "
          f"{n_layers} layers equal the reference's post-norm, post-RoPE q and k, worst "
          f"relative difference {worst:.3g} (bound {TOLERANCE:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
