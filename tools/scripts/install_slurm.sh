#!/usr/bin/env bash
# Install Slurm (slurm-wlm: slurmctld, slurmd, sbatch, srun ...) and munge from Debian, once.
#
# Used by the Slurm integration tests (tests/slurm_cluster.py) and by `make slurm`. Idempotent:
# returns at once when every command is already there. Needs root (apt-get); otherwise it says
# so and exits 1 without changing anything.
set -euo pipefail

needed=(sbatch srun squeue scancel sinfo slurmctld slurmd munged)
missing=()
for cmd in "${needed[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("$cmd")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "tfbench: installing Slurm needs root (missing: ${missing[*]}); run: sudo $0" >&2
  exit 1
fi
echo "tfbench: installing slurm-wlm and munge (missing: ${missing[*]})" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
