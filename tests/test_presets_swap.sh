#!/usr/bin/env bash
# One change per pairing (evict/preset.h): PRESET+obc_v|obc_k|obc_vk differs
# from PRESET only in the score. The swap PRESET+attn runs the pairing's
# code path with the baseline's own attention as its term; on a synthetic
# trace with every prompt row and the column sums, for every preset that
# pairs, both protocols, two budgets and with protected spans, it keeps
# exactly PRESET's set (the keep files' masks are equal), and PRESET+obc_vk
# records the same budget, window, recent window, sinks and allocation as
# PRESET. h2o's recent window is k / 2 of the k kept (the keep file's
# recent attribute, and evict's summary line), and its keep file replays.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch presets_swap
export OMP_WAIT_POLICY=passive

TRACE=$dir/t.h5 # 256 rows of 256 positions, column sums: every preset's rows
"$OBCACHE" synth --layers 4 --length 256 --rows 256 --column-sums --decode 2 --seed 5 \
  -o "$TRACE" >/dev/null || fatal "synth"

# compare_keeps LABEL BASE SWAP PAIR [LABEL BASE SWAP PAIR ...]: a line per
# case, "ok<TAB>LABEL" where SWAP's mask equals BASE's and it records the
# same policy attributes, and PAIR (unless "-") records BASE's budget,
# window, recent window, sinks, allocation and protocol; "fail<TAB>LABEL:
# why" otherwise. One Python process for every case.
compare_keeps() {
  python3 - "$@" <<'PY'
import sys
import h5py
import numpy as np


def differ(a, b, keys):
    for key in keys:
        x, y = a.attrs[key], b.attrs[key]
        if np.asarray(x).tobytes() != np.asarray(y).tobytes():
            return f"attribute {key}: {x!r} vs {y!r}"
    return None


args = sys.argv[1:]
for i in range(0, len(args), 4):
    label, base, swap, pair = args[i:i + 4]
    try:
        with h5py.File(base, "r") as a, h5py.File(swap, "r") as b:
            why = None
            if not np.array_equal(a["keep"][()], b["keep"][()]):
                why = f"masks differ at {int((a['keep'][()] != b['keep'][()]).sum())} positions"
            why = why or differ(a, b, ("budget", "n_candidates", "window", "recent", "sinks",
                                       "allocation", "protocol"))
            if not why and pair != "-":
                with h5py.File(pair, "r") as c:
                    why = differ(a, c, ("budget", "window", "recent", "sinks", "allocation",
                                        "protocol"))
                    why = why and "+obc_vk: " + why
    except Exception as e:  # a damaged or missing file fails its case alone
        why = f"{type(e).__name__}: {e}"
    print(f"fail\t{label}: {why}" if why else f"ok\t{label}")
PY
}
# report N: a pass or a fail for each line of compare_keeps on standard
# input, and a fail unless there were N.
report() {
  local seen=0 verdict label
  while IFS=$'\t' read -r verdict label; do
    seen=$((seen + 1))
    if [ "$verdict" = ok ]; then pass "$label"; else fail "$label"; fi
  done
  [ "$seen" -eq "$1" ] || fail "compare_keeps reported $seen of $1 cases"
}

# criticalkv-adakv pairs too, but projects with a model's W_o, which a
# synthetic trace has no model for: its swap is checked below on a capture.
# Every case's three keep files first, then one comparison of them all.
cases=()
for preset in h2o observed-attention tova tova-group snapkv snapkv-max7 pyramidkv \
  adakv-snapkv adakv-vatp; do
  for mode in aware agnostic; do
    for case in "10%" "30%" "25% --protect needle"; do
      # shellcheck disable=SC2086 # the case's words are options
      set -- --budget $case --protocol "$mode"
      k=$dir/${#cases[@]}
      if "$OBCACHE" evict "$TRACE" --score "$preset" "$@" -o "$k.base.h5" >/dev/null \
        2>"$dir/err" &&
        "$OBCACHE" evict "$TRACE" --score "$preset+attn" "$@" -o "$k.swap.h5" >/dev/null \
          2>>"$dir/err" &&
        "$OBCACHE" evict "$TRACE" --score "$preset+obc_vk" "$@" -o "$k.pair.h5" >/dev/null \
          2>>"$dir/err"; then
        cases+=("$preset $mode $case: +attn keeps its set, +obc_vk its knobs"
          "$k.base.h5" "$k.swap.h5" "$k.pair.h5")
      else
        fail "$preset $mode $case: $(tail -3 "$dir/err")"
      fi
    done
  done
done
report $((${#cases[@]} / 4)) < <(compare_keeps "${cases[@]}")

# h2o's recent window: k / 2 of the k = floor(248 x 0.3) = 74 kept (agnostic:
# 248 candidates before the question), in the keep file and the summary.
if "$OBCACHE" evict "$TRACE" --score h2o --budget 30% -o "$dir/h.h5" >"$dir/out" 2>"$dir/err" &&
  grep -q "budget 74 of 248 candidates (uniform, agnostic, window 0, recent 37," "$dir/out" &&
  python3 -c "import h5py,sys; f=h5py.File(sys.argv[1],'r'); k=f['keep'][()][:, :, :248]; \
sys.exit(not (int(f.attrs['recent'])==37 and k[:, :, 248-37:].all() and (k.sum(-1)==74).all()))" \
    "$dir/h.h5" &&
  "$OBCACHE" replay --offline "$TRACE" --keep "$dir/h.h5" -o "$dir/r" >/dev/null 2>"$dir/err"; then
  pass "h2o keeps the last 37 of its 74 as the recent window, recorded, printed, read back"
else
  fail "h2o's recent window: $(cat "$dir/out" "$dir/err")"
fi
expect_refused "+attn only on a preset that pairs" "knorm has no attention score to replace" \
  "$OBCACHE" evict "$TRACE" --score knorm+attn --budget 40% -o "$dir/k.h5"

# criticalkv-adakv projects with the model's W_o: its swap on a captured
# trace of the default model (skipped without it), both protocols. Its
# second stage adds 1e-4 to the score, so the swap holds only if the
# pairing's term is on the baseline's scale.
MODEL=${OBC_MODEL:-}
if [ -n "$MODEL" ] && [ -f "$MODEL" ]; then
  if "$OBCACHE" capture --model "$MODEL" --length 256 --depth 50 --haystack kjv --seed 2 \
    --rows 128 --decode 2 -o "$dir/c.h5" >/dev/null 2>&1; then
    for mode in aware agnostic; do
      if "$OBCACHE" evict "$dir/c.h5" --score criticalkv-adakv --budget 10% --protocol "$mode" \
        --model "$MODEL" -o "$dir/base.h5" >/dev/null 2>"$dir/err" &&
        "$OBCACHE" evict "$dir/c.h5" --score criticalkv-adakv+attn --budget 10% \
          --protocol "$mode" --model "$MODEL" -o "$dir/swap.h5" >/dev/null 2>>"$dir/err"; then
        report 1 < <(compare_keeps "criticalkv-adakv $mode 10%: +attn keeps its set" \
          "$dir/base.h5" "$dir/swap.h5" -)
      else
        fail "criticalkv-adakv $mode 10%: $(tail -3 "$dir/err")"
      fi
    done
  else
    fail "capture of a 256-token trace for criticalkv-adakv"
  fi
fi

finish
