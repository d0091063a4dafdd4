#!/usr/bin/env bash
# make test's set-up: the Debian packages of the root tests, installed once before any test runs,
# so that no two tests install at once: Slurm and munge (the Slurm tests), podman and mmdebstrap
# (the container tests). Never fails make test: without root it says once that those tests will
# skip; where an install fails, it says why here, and the first test that needs the packages
# fails with that reason while the others skip (tests/system_packages.py).
set -uo pipefail
cd "$(dirname "$0")"
if [ "$(id -u)" -ne 0 ]; then
  echo "tfbench: not root: the root tests (Slurm, emulated hosts, containers) skip" >&2
  exit 0
fi
for script in install_slurm.sh install_podman.sh; do  # each says what it installed and how long it took
  bash "$script" || echo "tfbench: tools/scripts/$script failed; the tests that need it say so" >&2
done
exit 0
