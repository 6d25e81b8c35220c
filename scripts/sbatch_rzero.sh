#!/usr/bin/env bash
# rzero on several nodes under SLURM: one task per node, each running the same command; the
# training processes of all nodes rendezvous on the first node. Submit from the repository
# root (the recipe's config paths are relative to it), with the run directory on a shared
# filesystem:
#
#   sbatch --nodes=2 scripts/sbatch_rzero.sh configs/my-2-node.yaml /shared/runs/x
#
# The recipe sets run.num_machines to the node count, run.train_gpus to each node's
# training GPUs and run.accelerate_config to configs/accelerate/multi_node.yaml. rzero reads
# this node's rank from SLURM_NODEID and node 0's address from MASTER_ADDR, set below from the
# job's node list; `rzero plan --config RECIPE` prints the placement and the launch line.
#SBATCH --job-name=rzero
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
set -euo pipefail
config=${1:?usage: sbatch --nodes=N scripts/sbatch_rzero.sh RECIPE RUN_DIR}
run_dir=${2:?usage: sbatch --nodes=N scripts/sbatch_rzero.sh RECIPE RUN_DIR}
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_ADDR
export MASTER_PORT=${MASTER_PORT:-29500}
# each task runs on its own node; SLURM_NODEID there is that node's rank
srun --kill-on-bad-exit=1 bash -c \
  'exec .venv/bin/rzero iterate --config "$0" --run-dir "$1"' "$config" "$run_dir"
