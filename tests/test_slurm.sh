#!/usr/bin/env bash
# A sweep on a real Slurm cluster: a one-node cluster started on this machine
# (scripts/slurm/local_cluster.sh: munged, slurmctld, slurmd), a 2 x 3 grid of
# the default model at 160-200 tokens submitted as an array job with its
# merge (scripts/slurm/submit.sh). Checks that
#   - the merged summary.csv, index.html and heat map equal, byte for byte,
#     those of the same plan run unsharded in one process (which equals the
#     one-command `obcache sweep ... -o DIR`: tests/test_sweep_plan.sh);
#   - a task killed (SIGKILL) in the middle of a cell leaves the grid
#     incomplete (the merge fails and names the cell), and resubmitting the
#     array finishes it with the same merge;
#   - a finished cell with a truncated file is reported as damaged, left out
#     of the merge, and run again by the next submission;
#   - an eval's plan (`obcache eval ... --plan`) runs through the same
#     scripts, and its merged CSVs equal the one-process eval's.
# The daemons are shut down whatever happens. Needs root, slurm-wlm and munge
# (scripts/setup.sh --tests installs them); skipped, saying why, without them.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}" "${OBC_TMP:?}" "${OBC_SOURCE_DIR:?}"
skip() { echo "SKIP: $*"; exit 0; }
[ -r "$OBC_MODEL" ] || skip "no model at $OBC_MODEL (run scripts/setup.sh)"
[ "$(id -u)" = 0 ] || skip "the test cluster's daemons run as root"
PATH=$PATH:/usr/sbin
for tool in munged slurmctld slurmd sbatch squeue scancel; do
  command -v "$tool" >/dev/null || skip "$tool not installed (apt-get install slurm-wlm munge)"
done
OBCACHE=$(cd "$(dirname "$OBCACHE")" && pwd)/$(basename "$OBCACHE")
slurm="$OBC_SOURCE_DIR/scripts/slurm"
on_exit() { # the daemons go down before the folder that holds their pid files
  "$slurm/local_cluster.sh" stop "$cluster"
}
scratch slurm
cluster="$dir/cluster"
# The waits below are only a safety net against a hang, which ends the test
# (the daemons go down with it; CTest's TIMEOUT would kill it without that):
# the whole test took 62 s under the sanitizers and 38 s in Release (ctest
# -j2 on the 2-core machine while other builds ran, 2026-12-01), so WAIT_S
# is about 10x the whole test for each wait.
WAIT_S=600
# wait_jobs LOGDIR: waits until the last submission's jobs left the queue.
wait_jobs() {
  local ids deadline=$((SECONDS + WAIT_S))
  read -r -a ids < "$1/last-submit"
  while [ "$SECONDS" -lt "$deadline" ]; do
    squeue -h -j "${ids[0]},${ids[1]}" 2>/dev/null | grep -q . || return 0
    sleep 0.5
  done
  squeue
  fatal "jobs ${ids[*]} still queued after $WAIT_S s"
}

if ! "$slurm/local_cluster.sh" start "$cluster"; then
  fatal "the one-node Slurm cluster did not start"
fi
export SLURM_CONF="$cluster/slurm.conf"

grid=(--lengths 160,200 --depths 0,50,100 --haystack noise --decode 2 --rows 16)
"$OBCACHE" sweep "${grid[@]}" --plan -o "$dir/plan" > /dev/null
check "sweep --plan writes plan.json" test -s "$dir/plan/plan.json"
for d in ref array killed; do mkdir -p "$dir/$d" && cp "$dir/plan/plan.json" "$dir/$d/"; done

# 1. The reference: the same plan unsharded, in one process.
"$OBCACHE" sweep "$dir/ref" > "$dir/ref.log" 2>&1 && "$OBCACHE" sweep "$dir/ref" --merge >> "$dir/ref.log" 2>&1
check "the unsharded run and its merge succeed" test $? -eq 0

# 2. The array job of 3 tasks and its merge.
start=$(date +%s.%N)
"$slurm/submit.sh" "$dir/array" 3 --obcache "$OBCACHE" --logs "$dir/array/logs"
wait_jobs "$dir/array/logs"
echo "wall time of the 3-task array and its merge: $(echo "$(date +%s.%N) - $start" | bc) s"
cat "$dir"/array/logs/merge-*.log
check "the 3-task array's merge equals the unsharded run" same_sweep "$dir/ref" "$dir/array"
check "one log per task" test "$(ls "$dir"/array/logs/sweep-*_*.log | wc -l)" -eq 3

# 3. Kill task 0 (cells 0, 2, 4) with SIGKILL in the middle of a cell, resubmit.
"$slurm/submit.sh" "$dir/killed" 2 --obcache "$OBCACHE" --logs "$dir/killed/logs" > /dev/null
read -r array_job merge_job < "$dir/killed/logs/last-submit"
# Until a cell of task 0 is under way (or the job left the queue: then the
# check below fails), however long the job waits to start.
deadline=$((SECONDS + WAIT_S))
while [ "$SECONDS" -lt "$deadline" ]; do
  ls -d "$dir"/killed/cells/.[024].partial.* > /dev/null 2>&1 && break
  squeue -h -j "$array_job" 2>/dev/null | grep -q . || break
  sleep 0.05
done
killed_cell=$(ls -d "$dir"/killed/cells/.[024].partial.* 2>/dev/null | head -1)
scancel --full --signal=KILL "${array_job}_0"
wait_jobs "$dir/killed/logs"
check "task 0 was killed in the middle of a cell" test -n "$killed_cell"
"$OBCACHE" sweep "$dir/killed" --merge --no-figures > "$dir/killed.merge" 2>&1
check "the merge after the kill fails and lists the interrupted cell" \
  grep -q "interrupted, stale lock" "$dir/killed.merge"
"$slurm/submit.sh" "$dir/killed" 2 --obcache "$OBCACHE" --logs "$dir/killed/logs" > /dev/null
wait_jobs "$dir/killed/logs"
check "after resubmitting, the merge equals the unsharded run" same_sweep "$dir/ref" "$dir/killed"
check "no lock or partial folder is left" \
  test -z "$(ls -a "$dir/killed/cells" | grep -e '\.lock$' -e partial)"

# 4. A damaged cell: detected, left out of the merge, run again.
size=$(stat -c %s "$dir/array/cells/1/trace.h5")
truncate -s $((size / 2)) "$dir/array/cells/1/trace.h5"
"$OBCACHE" sweep "$dir/array" --merge --no-figures > "$dir/damaged.merge" 2>&1
rc=$?
check "the merge of a damaged cell fails and names it" \
  eval '[ $rc -ne 0 ] && grep -q "cell 1 L160_D50: corrupt: trace.h5 has" "$dir/damaged.merge"'
check "the damaged cell's rows are left out of summary.csv" \
  eval '! grep -q "^160,50," "$dir/array/summary.csv" && grep -q "^160,0," "$dir/array/summary.csv"'
"$slurm/submit.sh" "$dir/array" 2 --obcache "$OBCACHE" --logs "$dir/array/logs" > /dev/null
wait_jobs "$dir/array/logs"
check "the damaged cell is run again and the merge equals the unsharded run" \
  same_sweep "$dir/ref" "$dir/array"

# 5. An eval's plan through the same scripts (they read its "command"),
# with the options of docs/results/ruler-niah-2048 (its pairings, the
# agnostic protocol, two tasks), smaller: one sample a task, so that each
# task of the 2-task array runs one; one budget under the sanitizers (an
# obcache built with AddressSanitizer: the same commands on less data, the
# numbers are the Release suite's).
budgets=10%,50%
if ldd "$OBCACHE" 2> /dev/null | grep -q libasan; then
  budgets=10%
fi
ev=(--tasks niah_single_1,niah_multikey_1 --samples 1 --length 400
  --pairs h2o+obc_k,tova+obc_k,snapkv+obc_k,adakv-snapkv+obc_k --budgets $budgets
  --protocol agnostic --max-new-tokens 4)
"$OBCACHE" eval "${ev[@]}" --no-figures -o "$dir/eval-ref" > "$dir/eval-ref.log" 2>&1
"$OBCACHE" eval "${ev[@]}" --plan -o "$dir/eval-array" > /dev/null
"$slurm/submit.sh" "$dir/eval-array" 2 --obcache "$OBCACHE" --logs "$dir/eval-array/logs" > /dev/null
wait_jobs "$dir/eval-array/logs"
check "an eval's 2-task array and its merge equal the one-process eval" \
  eval 'for f in accuracy.csv paired.csv recall.csv recall_policy.csv samples.csv prompts.jsonl; do
    cmp -s "$dir/eval-ref/$f" "$dir/eval-array/$f" || exit 1; done'

finish
