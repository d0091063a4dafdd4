#!/usr/bin/env bash
# Install podman (with runc, netavark and aardvark-dns) and mmdebstrap from Debian, once.
#
# Used by `make image` (tools/scripts/build_image.sh), by make test's set-up
# (install_test_packages.sh) and by the container tests themselves when run on their own.
# Debian 12's podman 4.3 runs containers with runc here (crun refuses a machine with hybrid
# cgroups); netavark and aardvark-dns give a `podman network` whose `--network-alias` names
# resolve between containers; mmdebstrap makes the Debian base image where no registry of base
# images is reachable. Idempotent: returns at once when every command is there. Needs root
# (apt-get); otherwise it says so and exits 1 without changing anything. Installs run one at a
# time (debian_packages.sh).
set -euo pipefail
source "$(dirname "$0")/debian_packages.sh"

missing_podman() {
  local cmd helper missing=()
  for cmd in podman runc mmdebstrap iptables; do
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("$cmd")
  done
  for helper in netavark aardvark-dns; do
    [ -x "/usr/lib/podman/$helper" ] || missing+=("$helper")
  done
  echo "${missing[*]}"
}
install_debian_packages podman missing_podman podman runc netavark aardvark-dns iptables mmdebstrap ca-certificates
