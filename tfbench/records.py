"""Result records: what one task measured, and what the cluster did in the measured window.

results.jsonl is append-only; each line is one record with "kind": "task" or "cluster".
Tasks append their own record (under an advisory lock) so that a launcher that dies later
cannot lose them; the launcher appends the cluster record computed from those.
"""
from __future__ import annotations

import fcntl
import json
import os
from typing import Dict, Iterable, List, Optional, Sequence

from tfbench import stats

RESULTS_FILE = "results.jsonl"


def append(path: str, record: dict) -> None:
    """Appends one JSON line atomically with respect to other tfbench writers."""
    line = json.dumps(record, sort_keys=True, default=_jsonable) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def read(path: str) -> List[dict]:
    """All complete records; a torn last line (a task killed mid-write) is skipped."""
    if not os.path.exists(path):
        return []
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def task_record(*, run_id: str, role: str, index: int, images_per_step: int,
                step_times_s: Sequence[float], step_start_wall: Sequence[float],
                extra: Optional[Dict] = None) -> dict:
    """The record of one task's measured steps (warm-up steps are never passed in)."""
    record = {
        "kind": "task",
        "run_id": run_id,
        "role": role,
        "index": index,
        "images_per_step": images_per_step,
        "num_measured_steps": len(step_times_s),
        "step_times_s": [float(t) for t in step_times_s],
        "step_start_wall": [float(t) for t in step_start_wall],
        "stats": stats.step_time_stats(step_times_s),
        "images_per_sec": stats.images_per_sec(images_per_step, step_times_s),
        "window_start": float(step_start_wall[0]),
        "window_end": float(step_start_wall[-1] + step_times_s[-1]),
    }
    record.update(extra or {})
    return record


def measuring_tasks(records: Iterable[dict]) -> List[dict]:
    """Task records that processed images in the measured window (not evaluators)."""
    return [r for r in records if r.get("kind") == "task" and r.get("counts_toward_cluster", True)]


def cluster_record(run_id: str, task_records: Sequence[dict], extra: Optional[Dict] = None) -> dict:
    """Cluster images/sec = all images in the measured window / the window's wall time.

    The window runs from the first measured step's start to the last measured step's end,
    across tasks. Step-time statistics pool every measured step of every task.
    """
    tasks = measuring_tasks(task_records)
    if not tasks:
        raise ValueError("no task measured any step")
    start = min(r["window_start"] for r in tasks)
    end = max(r["window_end"] for r in tasks)
    images = sum(r["images_per_step"] * r["num_measured_steps"] for r in tasks)
    pooled = [t for r in tasks for t in r["step_times_s"]]
    record = {
        "kind": "cluster",
        "run_id": run_id,
        "status": "ok",
        "num_tasks": len(tasks),
        "images": images,
        "window_start": start,
        "window_end": end,
        "window_s": end - start,
        "images_per_sec": images / (end - start) if end > start else float("nan"),
        "stats": stats.step_time_stats(pooled),
        "task_images_per_sec": {f"{r['role']}_{r['index']}": r["images_per_sec"] for r in tasks},
    }
    record.update(extra or {})
    return record
