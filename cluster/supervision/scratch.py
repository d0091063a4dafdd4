"""Each run's scratch directory: its tasks' TMPDIR (tfbench.results.rundir.RunDir.scratch), owned
by the process that supervises the run and removed when the run ends.

TensorFlow writes its autograph sources to the temporary directory and deletes them at a clean
exit only; a task that tfbench stops with a signal (every parameter server, any task of a failed
run) never gets there. The owner file, as the namespaces' (cluster.net.netns), lets the next run
remove the directory of a run whose supervisor was killed outright.
"""
from __future__ import annotations

import glob
import os
import shutil
import tempfile
from typing import List

from cluster.net import ownership
from tfbench.results.rundir import SCRATCH_PREFIX, RunDir

OWNER_FILE = ".tfbench-owner.json"


def open_run(run: RunDir) -> str:
    """Creates the run's scratch directory, owned by this process, after removing dead runs' ones."""
    remove_stale()
    os.makedirs(run.scratch, exist_ok=True)
    ownership.write(os.path.join(run.scratch, OWNER_FILE), run.path)
    return run.scratch


def close_run(run: RunDir) -> None:
    """Removes the directory and what the run's tasks left in it; call once they are all gone."""
    shutil.rmtree(run.scratch, ignore_errors=True)


def _owner_alive(path: str) -> bool:
    """True unless the directory's owner file names a process that no longer exists (a directory
    without one is being created, or is not one tfbench made)."""
    owner_file = os.path.join(path, OWNER_FILE)
    return not os.path.exists(owner_file) or ownership.alive(ownership.read(owner_file))


def stale() -> List[str]:
    """Scratch directories of runs whose supervising process is gone."""
    found = glob.glob(os.path.join(tempfile.gettempdir(), SCRATCH_PREFIX + "*"))
    return sorted(p for p in found if os.path.isdir(p) and not _owner_alive(p))


def remove_stale() -> List[str]:
    """Removes every stale scratch directory; the paths removed."""
    gone = stale()
    for path in gone:
        shutil.rmtree(path, ignore_errors=True)
    return gone
