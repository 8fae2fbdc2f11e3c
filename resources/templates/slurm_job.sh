#!/bin/bash
# Slurm job for the MoK experiment "{{NAME}}", written by MoK Workbench.
# Submit with:  sbatch {{SCRIPT_NAME}}
# The config travels beside this script as {{CONFIG_NAME}}; metrics land in {{DB}}.
#SBATCH --job-name={{JOB_NAME}}
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task={{CPUS}}
#SBATCH --gpus={{GPUS}}
#SBATCH --time={{TIME}}
#SBATCH --output=%x-%j.out

set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")}"
MOK="${MOK:-mok}"
mkdir -p "$(dirname "{{DB}}")"
"$MOK" train "{{CONFIG_NAME}}" --db "{{DB}}" --json
