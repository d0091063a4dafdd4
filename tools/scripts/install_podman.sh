#!/usr/bin/env bash
# Install podman (with runc, netavark and aardvark-dns) and mmdebstrap from Debian, once.
#
# Used by `make image` (tools/scripts/build_image.sh) and the container tests, which run it
# themselves as root. Debian 12's podman 4.3 runs containers with runc here (crun refuses a
# machine with hybrid cgroups); netavark and aardvark-dns give a `podman network` whose
# `--network-alias` names resolve between containers; mmdebstrap makes the Debian base image
# where no registry of base images is reachable. Idempotent: returns at once when every command
# is there. Needs root (apt-get); otherwise it says so and exits 1 without changing anything.
set -euo pipefail

missing=()
for cmd in podman runc mmdebstrap iptables; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("$cmd")
done
for helper in netavark aardvark-dns; do
  [ -x "/usr/lib/podman/$helper" ] || missing+=("$helper")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "tfbench: installing podman needs root (missing: ${missing[*]}); run: sudo $0" >&2
  exit 1
fi
echo "tfbench: installing podman, runc, netavark, aardvark-dns and mmdebstrap (missing: ${missing[*]})" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends podman runc netavark aardvark-dns iptables mmdebstrap \
  ca-certificates >/dev/null
