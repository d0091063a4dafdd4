"""Progress files: how a task tells the launcher how far it got, without any connection to it.

Each task replaces tasks/<name>.progress atomically with a small JSON object
{"phase", "step", "total", "time", "pid"}, plus "node" (SLURMD_NODENAME) when Slurm started it;
the launcher polls these files for its status line, readiness, stall detection and the pids of
processes it did not start itself (Horovod ranks, Slurm tasks), and a Slurm node's monitor for
the tasks of its own node.
Only the standard library is imported, so the task side can write progress before TensorFlow loads.
"""
from __future__ import annotations

import json
import os
import time
from typing import Optional

PHASES = ("starting", "ready", "warmup", "measure", "done")
NODE_ENV = "SLURMD_NODENAME"  # the Slurm node a task runs on, as slurmd names it


def path(run_dir: str, task_name: str) -> str:
    return os.path.join(run_dir, "tasks", f"{task_name}.progress")


def write_progress(run_dir: str, task_name: str, phase: str, step: int = 0, total: int = 0) -> None:
    """Replaces the task's progress file; readers never see a half-written one."""
    if phase not in PHASES:
        raise ValueError(f"unknown progress phase {phase!r}; expected one of {', '.join(PHASES)}")
    target = path(run_dir, task_name)
    tmp = f"{target}.{os.getpid()}.tmp"
    record = {"phase": phase, "step": int(step), "total": int(total), "time": time.time(), "pid": os.getpid()}
    if os.environ.get(NODE_ENV):
        record["node"] = os.environ[NODE_ENV]
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(tmp, target)


def read_progress(run_dir: str, task_name: str) -> Optional[dict]:
    """The task's last progress, or None if it has written none (or the file is unreadable)."""
    try:
        with open(path(run_dir, task_name), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("phase") in PHASES else None


def phase_rank(record: Optional[dict]) -> int:
    """Position of the record's phase in PHASES; -1 without a record."""
    return PHASES.index(record["phase"]) if record else -1


def reached(record: Optional[dict], phase: str) -> bool:
    return phase_rank(record) >= PHASES.index(phase)


def clear(run_dir: str, task_name: str) -> None:
    """Removes a previous attempt's progress so that it cannot be taken for the next one's."""
    try:
        os.remove(path(run_dir, task_name))
    except FileNotFoundError:
        pass
