#!/usr/bin/env python3
"""Compares two model replays of the same trace and kept sets, one on the GPU
and one on the CPU (tests/gpu/kit_run.sh, step "replay: cuda vs cpu"):
replay_cells.csv of `obcache replay --sweep ... --device cuda` against the
CPU's, cell by cell, and exits 1 above the tolerances.

Why these tolerances: both runtimes compute the same fp32 products in
another order (logits agree to ~1e-6 of their largest value, gpu_runtime
checks it), so the teacher-forced KL of a step, a smooth function of the
logits, moves by far less than KL_TOLERANCE (1e-3 absolute + 1e-2 relative).
A free-running token can flip only where the two best logits are that close;
a flip then changes the rest of that cell's answer, so AGREEMENT_SHARE (90%)
of the cells must have the same share of matching tokens and the same
needle verdict. The offline columns come from the trace alone and must be
identical.

usage: compare_replays.py GPU_CELLS_CSV CPU_CELLS_CSV
"""
import csv
import sys

KL_ABS, KL_REL = 1e-3, 1e-2
AGREEMENT_SHARE = 0.9
OFFLINE = ("rel_error", "rel_error_step1", "mass_lost", "needle_kept")


def rows(path):
    with open(path, newline="") as f:
        return {(r["score"], r["budget"]): r for r in csv.DictReader(f)}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    gpu, cpu = rows(sys.argv[1]), rows(sys.argv[2])
    if set(gpu) != set(cpu) or not gpu:
        sys.exit("the two replays do not hold the same cells")
    worst_kl, same_tokens, bad = 0.0, 0, []
    for key in sorted(cpu):
        g, c = gpu[key], cpu[key]
        for column in OFFLINE:
            if g[column] != c[column]:
                bad.append(f"{key}: offline {column} {g[column]} vs {c[column]}")
        kg, kc = float(g["kl_forced"]), float(c["kl_forced"])
        worst_kl = max(worst_kl, abs(kg - kc))
        if abs(kg - kc) > KL_ABS + KL_REL * abs(kc):
            bad.append(f"{key}: kl_forced {kg} vs {kc}")
        same_tokens += g["agreement"] == c["agreement"] and g["needle_found"] == c["needle_found"]
    share = same_tokens / len(cpu)
    print(f"{len(cpu)} cells: largest |KL gpu - cpu| {worst_kl:.3g}; same free-running answers "
          f"in {same_tokens} ({share:.0%}, need >= {AGREEMENT_SHARE:.0%})")
    if share < AGREEMENT_SHARE:
        bad.append(f"only {share:.0%} of the cells decode the same answers")
    for line in bad:
        print("FAIL " + line)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
