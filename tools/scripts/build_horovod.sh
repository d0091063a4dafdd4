#!/usr/bin/env bash
# Build (once) and install Horovod 0.28.1 with Gloo, CPU-only, against the TensorFlow in $VENV.
#
#   build_horovod.sh               the wheel (cached, or built), installed into $VENV and checked
#   build_horovod.sh --wheel-only  the wheel only, into the cache (the image's build stage)
#   build_horovod.sh --check       only the check of an installed Horovod (the image, after
#                                  `pip install "tfbench[horovod]" --find-links <the cache>`)
#
# Horovod 0.28.1 is the last release and does not compile against TensorFlow 2.21 as shipped:
# horovod/tensorflow/xla_mpi_ops.cc includes XLA headers TensorFlow has since moved. Those XLA
# custom-call ops only serve GPU builds with XLA support, so a CPU/Gloo build drops that one
# source file. HOROVOD_GPU_OPERATIONS=NCCL (with CUDA's nvcc and NCCL where it builds) adds GPU
# operations. The wheel is cached outside the clone (TFBENCH_WHEEL_CACHE) so that a fresh clone
# installs in seconds instead of rebuilding for ~8 minutes. See BUILD.md.
set -euo pipefail
# TensorFlow's C++ start-up notices (oneDNN, CUDA drivers, CPU features) are INFO and WARNING
# lines; the checks below import TensorFlow several times, so keep them off the console.
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
MODE=${1:-install}
case "$MODE" in install|--wheel-only|--check) ;; *) echo "usage: $0 [--wheel-only|--check]" >&2; exit 2;; esac

VENV=${VENV:-.venv}
VENV=$(cd "$VENV" && pwd -P)  # a link to a shared environment (make setup): scripts name its own path
PY="$VENV/bin/python"
HVD_VERSION=0.28.1  # pyproject.toml's extra `horovod` pins the same (tests/test_package.py)
CACHE=${TFBENCH_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfbench/wheels}
TF_VERSION=$("$PY" -c 'import importlib.metadata as m; print(m.version("tensorflow"))')
CACHE_DIR="$CACHE/tf-$TF_VERSION"

# `horovodrun --check-build`, through tfbench's cache of its answer, so that the first Horovod
# run does not import TensorFlow once more to ask it. TensorFlow's CUDA-stub notice is logged
# before its log level applies: the output is shown only on failure.
check() {
  local out
  out=$(PYTHONPATH=. "$PY" -c 'import sys
from tfbench.measure.environment import horovod_check_build
out = horovod_check_build(refresh=True)
print(out)
sys.exit(0 if "Available Frameworks" in out and "[X] TensorFlow" in out else 1)' 2>&1) || { echo "$out" >&2; exit 1; }
}

if [ "$MODE" = --check ]; then
  check
  exit 0
fi
if [ "$MODE" = install ] && "$PY" -c 'import horovod.tensorflow' 2>/dev/null; then
  exit 0
fi

wheel=$(ls "$CACHE_DIR"/horovod-"$HVD_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "tfbench: building Horovod $HVD_VERSION (Gloo, CPU${HOROVOD_GPU_OPERATIONS:+, GPU: $HOROVOD_GPU_OPERATIONS}) against TensorFlow $TF_VERSION; about 8 minutes on 2 cores" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  if ! command -v cmake >/dev/null; then  # no system CMake: the PyPI build of it, into the venv
    "$PY" -m pip install --quiet "cmake>=3.13,<4"
    export PATH="$(cd "$VENV/bin" && pwd):$PATH"
  fi
  "$PY" -m pip download --quiet --no-deps --no-binary :all: -d "$work" "horovod==$HVD_VERSION"
  tar -xzf "$work"/horovod-"$HVD_VERSION".tar.gz -C "$work"
  src="$work/horovod-$HVD_VERSION"
  sed -i '/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
  mkdir -p "$CACHE_DIR"
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
  HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=GLOO \
  MAKEFLAGS=${MAKEFLAGS:--j$(nproc)} \
    "$PY" -m pip wheel --no-build-isolation --no-deps -w "$work/dist" "$src" >"$work/build.log" 2>&1 \
    || { tail -n 40 "$work/build.log" >&2; echo "tfbench: Horovod build failed (full log above); see BUILD.md" >&2; exit 1; }
  cp "$work"/dist/horovod-*.whl "$CACHE_DIR/"
  wheel=$(ls "$CACHE_DIR"/horovod-"$HVD_VERSION"-*.whl | head -n 1)
fi
if [ "$MODE" = --wheel-only ]; then
  exit 0
fi
"$PY" -m pip install --quiet "$wheel"
check
