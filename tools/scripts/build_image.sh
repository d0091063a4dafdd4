#!/usr/bin/env bash
# `make image`: the tfbench image (Containerfile) built with podman from tfbench's tracked files.
#
#   BASE=<image>     the base (default: localhost/tfbench-base:bookworm, a Debian 12 root
#                    filesystem with Python 3.11 that mmdebstrap makes here and podman imports, once)
#   VARIANT=cpu|gpu  the CPU image (default) or the GPU variant (BUILD.md)
#   IMAGE=<name>     the tag (default tfbench:latest, or tfbench:gpu for VARIANT=gpu)
#   HOROVOD_WHEELS=<dir>  a cache of Horovod wheels (<dir>/tf-<version>/horovod-*.whl) to hand in
#                    (default: the one `make setup` fills, ~/.cache/tfbench/wheels; empty: build
#                    Horovod inside the image)
#
# The context holds the files git would commit (tracked, and new ones not ignored), as they are in
# the working tree, and the handed-in wheel; the image records the commit (TFBENCH_COMMIT,
# +modified for a tree that differs from it).
# Where pip on this machine trusts a CA of its own (a proxy's), that CA and a pip.conf naming it are
# mounted at /mnt for the build's steps only, so that none of it is in a layer.
set -euo pipefail
cd "$(dirname "$0")/../.."
VARIANT=${VARIANT:-cpu}
case "$VARIANT" in cpu|gpu) ;; *) echo "tfbench: VARIANT must be cpu or gpu, got '$VARIANT'" >&2; exit 2;; esac
IMAGE=${IMAGE:-tfbench:$([ "$VARIANT" = cpu ] && echo latest || echo gpu)}
LOCAL_BASE=localhost/tfbench-base:bookworm
BASE=${BASE:-$LOCAL_BASE}
HOROVOD_WHEELS=${HOROVOD_WHEELS-${TFBENCH_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfbench/wheels}}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/tools/scripts/containers.conf}

bash tools/scripts/install_podman.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/tfbench-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ "$BASE" = "$LOCAL_BASE" ] && ! podman image exists "$LOCAL_BASE"; then
  echo "tfbench: making $LOCAL_BASE (mmdebstrap: Debian 12 minbase with python3, python3-venv)" >&2
  # mmdebstrap copies this machine's hostname and resolver into the root filesystem: removed
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv \
    --customize-hook='rm -f "$1/etc/hostname" "$1/etc/resolv.conf"' bookworm "$work/rootfs.tar"
  podman import --quiet "$work/rootfs.tar" "$LOCAL_BASE" >/dev/null
  rm -f "$work/rootfs.tar"
fi

context="$work/context"
mkdir -p "$context/wheels"
git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null \
  | tar -xf - -C "$context"
tf=$(sed -n 's/^tensorflow==//p' requirements.txt)
if [ -n "$HOROVOD_WHEELS" ] && ls "$HOROVOD_WHEELS/tf-$tf"/horovod-*.whl >/dev/null 2>&1; then
  mkdir -p "$context/wheels/tf-$tf"
  cp "$HOROVOD_WHEELS/tf-$tf"/horovod-*.whl "$context/wheels/tf-$tf/"
fi
commit=$(git rev-parse --short=7 HEAD)$(git status --porcelain | grep -q . && echo +modified || true)

volumes=()
cert=${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}
if [ -n "$cert" ] && [ -f "$cert" ]; then
  mkdir -p "$work/mnt"
  cp "$cert" "$work/mnt/ca.crt"
  printf '[global]\ncert = /mnt/ca.crt\n' > "$work/mnt/pip.conf"
  volumes=(--volume "$work/mnt:/mnt:ro")
fi

echo "tfbench: building $IMAGE (VARIANT=$VARIANT, BASE=$BASE, commit $commit)" >&2
before=$(podman images --all --quiet --no-trunc | sort)
started=$(date +%s)
podman build --network=host "${volumes[@]}" --build-arg BASE="$BASE" --build-arg VARIANT="$VARIANT" \
  --build-arg TFBENCH_COMMIT="$commit" --tag "$IMAGE" --file "$context/Containerfile" "$context" \
  2>&1 | tee "$work/build.log"
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
# The images earlier builds of this tag made and this one did not use (its former image, stages no
# longer used) go. Every image this build made or took from the cache (each step's "--> <id>") stays:
# podman removes an untagged stage image that a newer image stands on, and the next build then finds
# no cache and installs the pins again (141 s instead of 33 s here, 2026-12-06).
state="${XDG_CACHE_HOME:-$HOME/.cache}/tfbench/image-$(echo "$IMAGE" | tr '/:' '__').ids"
mkdir -p "$(dirname "$state")"
current=sha256:$(podman image inspect --format '{{.Id}}' "$IMAGE")
used=$(sed -n 's/^--> \(Using cache \)\{0,1\}\([0-9a-f]\{11,\}\).*/\2/p' "$work/build.log" | cut -c1-11 | sort -u)
for id in $(cat "$state" 2>/dev/null); do
  short=$(echo "${id#sha256:}" | cut -c1-11)
  [ "$id" = "$current" ] || echo "$used" | grep -qx "$short" || podman rmi "$id" >/dev/null 2>&1 || true
done
{ podman images --all --quiet --no-trunc | sort | comm -13 <(echo "$before") -
  for id in $(cat "$state" 2>/dev/null); do if podman image exists "$id"; then echo "$id"; fi; done
} | sort -u > "$state.tmp"
mv "$state.tmp" "$state"
echo "tfbench: built $IMAGE in $(( $(date +%s) - started )) s, $(( size / 1000000 )) MB" >&2
