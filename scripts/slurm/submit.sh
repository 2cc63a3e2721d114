#!/usr/bin/env bash
# Submits a sweep or an eval to Slurm: an array job of TASKS tasks that run the cells of
# DIR's plan (scripts/slurm/sweep.sbatch), then the merge
# (scripts/slurm/merge.sbatch) once every task has ended, whether or not it
# succeeded (--dependency=afterany). Running it again on the same DIR resumes:
# finished cells are skipped. Prints the two job ids.
#
# usage: scripts/slurm/submit.sh DIR TASKS [options] [-- more sbatch options]
#   --partition P   Slurm partition (e.g. a GPU or a CPU one)
#   --gpus N        GPUs per task (--gres=gpu:N); give the plan --device cuda
#   --cpus N        CPUs per task; obcache uses that many threads
#   --mem M         memory per task (sbatch --mem, e.g. 32G)
#   --time T        time limit per task (sbatch --time, e.g. 4:00:00)
#   --logs LOGDIR   folder of the per-task logs (default DIR/logs)
#   --obcache PATH  the obcache binary (default: obcache on PATH)
#   --run-score-cmds  run the eval plan's --score-cmd commands (obcache eval --help)
set -euo pipefail
usage() { sed -n '8,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
dir=$1 tasks=$2
shift 2
[[ $tasks =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: TASKS must be a positive number" >&2; exit 2; }
[ -f "$dir/plan.json" ] || {
  echo "submit.sh: $dir/plan.json: no plan (make it with obcache sweep|eval ... --plan -o $dir)" >&2
  exit 2
}
here=$(cd "$(dirname "$0")" && pwd)
task_opts=() merge_opts=() extra=() obcache_opts=()
logs=$dir/logs
obcache=$(command -v obcache || true)
while [ $# -gt 0 ]; do
  case $1 in
    --partition) task_opts+=(--partition "$2"); merge_opts+=(--partition "$2"); shift 2 ;;
    --gpus) task_opts+=(--gres "gpu:$2"); shift 2 ;;
    --cpus) task_opts+=(--cpus-per-task "$2"); shift 2 ;;
    --mem) task_opts+=(--mem "$2"); shift 2 ;;
    --time) task_opts+=(--time "$2"); shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --obcache) obcache=$2; shift 2 ;;
    --run-score-cmds) obcache_opts+=(--run-score-cmds); shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "submit.sh: unknown option $1" >&2; usage ;;
  esac
done
[ -n "$obcache" ] && [ -x "$obcache" ] || {
  echo "submit.sh: no obcache binary (put it on PATH or give --obcache PATH)" >&2
  exit 2
}
dir=$(cd "$dir" && pwd)
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
export OBCACHE
OBCACHE=$(cd "$(dirname "$obcache")" && pwd)/$(basename "$obcache")
array=$(sbatch --parsable --array="0-$((tasks - 1))" --output="$logs/sweep-%A_%a.log" \
  "${task_opts[@]}" "${extra[@]}" "$here/sweep.sbatch" "$dir" "${obcache_opts[@]}")
array=${array%%;*}
merge=$(sbatch --parsable --dependency="afterany:$array" --output="$logs/merge-%j.log" \
  "${merge_opts[@]}" "${extra[@]}" "$here/merge.sbatch" "$dir")
merge=${merge%%;*}
echo "array job $array ($tasks tasks), merge job $merge; logs in $logs"
echo "$array $merge" > "$logs/last-submit"
