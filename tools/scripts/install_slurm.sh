#!/usr/bin/env bash
# Install Slurm (slurm-wlm: slurmctld, slurmd, sbatch, srun ...) and munge from Debian, once.
#
# Used by the Slurm integration tests (tests/slurm_cluster.py) and by `make slurm`. Idempotent:
# returns at once when every command is already there. Needs root (apt-get); otherwise it says
# so and exits 1 without changing anything.
set -euo pipefail
source "$(dirname "$0")/debian_packages.sh"

needed=(sbatch srun squeue scancel sinfo slurmctld slurmd munged)
missing=()
for cmd in "${needed[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("$cmd")
done
install_debian_packages Slurm "${missing[*]}" slurm-wlm munge
