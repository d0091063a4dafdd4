#!/usr/bin/env bash
# The virtualenv of a clone, with the pinned requirements: setup_venv.sh PYTHON VENV SHARED STAMP
#
# The requirements are the package's (requirements.txt, which pyproject.toml reads as its
# dependencies) and the test suite's (pyproject.toml's dependency group `test`). The clone's own
# code is not installed into the environment, which clones share: make runs it from the clone
# (`python -m`), and `pip install .` is for environments of one checkout or release (BUILD.md).
#
# SHARED non-empty: the environment lives once per interpreter and requirements under the user's
# cache (SHARED, as Poetry keeps its environments) and the clone links it as VENV, so that another
# clone of the same requirements is set up in a second instead of ~2 minutes of pip. SHARED empty,
# or VENV already a directory: the environment is VENV itself. STAMP (inside VENV) records that
# the requirements are installed; clones setting up the same environment at once take turns.
set -euo pipefail
PYTHON=$1 VENV=$2 SHARED=$3 STAMP=$4

if [ -n "$SHARED" ] && [ ! -e "$VENV" ] && [ ! -L "$VENV" ]; then
  mkdir -p "$SHARED"
  ln -s "$SHARED" "$VENV"
fi
target=$(cd "$VENV" 2>/dev/null && pwd -P || echo "$VENV")
mkdir -p "$(dirname "$target")"
exec 9>"$target.lock"
flock 9
if [ -e "$STAMP" ]; then
  exit 0  # another clone installed them while this one waited
fi
# pip writes its interpreter's path into every script it installs (tensorboard, horovodrun):
# the environment's own path, never the clone's link to it, which goes when the clone does
test -x "$target/bin/python" || "$PYTHON" -m venv "$target"
"$target/bin/python" -m pip install --quiet --upgrade pip
"$target/bin/python" -m pip install --quiet -r requirements.txt --group test
rm -f "$target"/.requirements-*
touch "$STAMP"
