#!/usr/bin/env bash
# Install Slurm (slurm-wlm: slurmctld, slurmd, sbatch, srun ...) and munge from Debian, once.
#
# Used by `make slurm`, by make test's set-up (install_test_packages.sh) and by the Slurm tests
# themselves (cluster/slurm/local_cluster.py) when run on their own. Idempotent: returns at once
# when every command is already there. Needs root (apt-get); otherwise it says so and exits 1
# without changing anything. Installs run one at a time (debian_packages.sh).
set -euo pipefail
source "$(dirname "$0")/debian_packages.sh"

missing_slurm() {
  local cmd missing=()
  for cmd in sbatch srun squeue scancel sinfo slurmctld slurmd munged; do
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("$cmd")
  done
  echo "${missing[*]}"
}
install_debian_packages Slurm missing_slurm slurm-wlm munge
