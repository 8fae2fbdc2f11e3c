#!/bin/bash
# Slurm job for the MoK experiment "{{NAME}}", written by MoK.
# Submit from this folder:  sbatch {{SCRIPT_NAME}}
# The config is {{CONFIG_NAME}} beside this script; metrics go to {{DB}}, checkpoints under {{CHECKPOINTS}}/.
{{SBATCH}}
#SBATCH --output=%x-%j.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --signal=B:USR1@{{SIGNAL_LEAD}}

set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")}"
if [[ ! -f {{CONFIG_WORD}} ]]; then
  echo "mok job: no" {{CONFIG_WORD}} "in $PWD: submit from the job's folder" >&2
  exit 2
fi
MOK="${MOK:-mok}"  # the mok binary: set MOK=/path/to/mok when it is not on the PATH
DB={{DB_WORD}}
CHECKPOINTS={{CHECKPOINTS_WORD}}
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off
mkdir -p "$CHECKPOINTS" "$(dirname "$DB")"

# Resume: the newest run folder of this experiment that holds a checkpoint (mok train
# --resume takes a run folder's newest checkpoint and continues the same run).
RESUME=()
for run in "$CHECKPOINTS"/{{RUN_PREFIX}}-run*/; do
  compgen -G "${run}step_*" > /dev/null || continue
  if [[ ${#RESUME[@]} -eq 0 || "$run" -nt "${RESUME[1]}" ]]; then RESUME=(--resume "${run%/}"); fi
done
if [[ ${#RESUME[@]} -gt 0 ]]; then echo "mok job: resuming from ${RESUME[1]}" >&2; fi

# USR1 comes {{SIGNAL_LEAD}} s before the time limit: every rank gets SIGTERM (stop_training,
# below), saves a checkpoint of its last whole step and stops; then the job goes back to the
# queue, and its next start resumes from that checkpoint.
REQUEUED=0
on_time_limit() {
  echo "mok job: time limit near: checkpointing and requeueing job ${SLURM_JOB_ID:-}" >&2
  REQUEUED=1
  stop_training
  wait "$TRAIN_PID" || true
  scontrol requeue "$SLURM_JOB_ID"
}
trap on_time_limit USR1

{{LAUNCH}}
# The shell waits in `wait`, which a signal interrupts, so the trap runs at once.
TRAIN_PID=$!
STATUS=0
wait "$TRAIN_PID" || STATUS=$?
if [[ $REQUEUED -eq 1 ]]; then exit 0; fi
exit "$STATUS"
