"""Owner files: which process holds something that outlives a killed process (a run's network
namespaces, cluster.net.netns; its scratch directory, cluster.supervision.scratch), so that the
next run can tell a live owner from a dead one and remove what the dead one left.

A process is named by its pid and its kernel creation time: a pid reused by a later process is
not the owner.
"""
from __future__ import annotations

import json
import os
from typing import Optional

import psutil


def write(path: str, run_dir: str) -> None:
    """Records this process as the owner, in the file at `path`: written beside it and renamed
    into place, so that another run's cleanup reading it meanwhile finds the whole file or none,
    never an empty one (which names no live owner: the cleanup took the run for a dead one's and
    stopped its tasks)."""
    me = psutil.Process()
    partial = f"{path}.{me.pid}.partial"
    with open(partial, "w", encoding="utf-8") as f:
        json.dump({"pid": me.pid, "create_time": me.create_time(), "run_dir": run_dir}, f)
    os.replace(partial, path)


def read(path: str) -> Optional[dict]:
    """The owner file's contents; None when there is none or it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def alive(info: Optional[dict]) -> bool:
    """Whether the process an owner file names still runs (the same pid and creation time)."""
    if not info:
        return False
    try:
        return abs(psutil.Process(int(info["pid"])).create_time() - float(info["create_time"])) < 0.01
    except (psutil.Error, KeyError, ValueError, TypeError):
        return False
