"""Runs -> results.csv: one row per cluster record and per task record, config flattened in.

Every row carries the full config so that the CSV alone can be filtered and pivoted; nested
record fields (placement reports, resources) become dotted columns.
"""
from __future__ import annotations

import csv
import dataclasses
import os
from typing import Dict, Iterable, List, Sequence

import tfbench.config as config_lib
from tools.report.aggregate import rate_interval
from tools.rundirs.runs import Run

LEAD = ("run_id", "run_dir", "kind", "status", "task", "role", "index", "failed_task", "reason")
CONFIG = tuple(f.name for f in dataclasses.fields(config_lib.RunConfig))
STAT_NAMES = ("count", "mean_s", "median_s", "p90_s", "std_s", "ci95_s", "jitter_s", "min_s", "max_s")
METRICS = ("global_batch_size", "images_per_sec", "images_per_sec_ci95_low", "images_per_sec_ci95_high",
           "scaling_efficiency", "images", "window_s", "num_measured_steps") + tuple(f"step_{s}" for s in STAT_NAMES)
# Record fields shown through other columns (or too bulky to be useful in a table).
_HANDLED = {"kind", "run_id", "status", "role", "index", "failed_task", "reason", "config", "stats",
            "images_per_sec", "step_start_wall", "task_images_per_sec", "step_breakdown"}


def rows(runs: Sequence[Run], efficiency: Dict[str, float], root: str) -> List[Dict]:
    """Cluster rows (with scaling efficiency) followed by their runs' task rows."""
    result = []
    for run in runs:
        result.append(_cluster_row(run, efficiency.get(run.path, float("nan")), root))
        resources = run.task_resources
        for task in run.tasks:
            result.append(_task_row(run, task, resources, root))
    return result


def _base(run: Run, root: str, kind: str) -> Dict:
    row = {"run_id": run.run_id, "run_dir": os.path.relpath(run.path, root), "kind": kind}
    for name in CONFIG:
        value = run.config.get(name)
        row[name] = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value
    return row


def _metrics(row: Dict, rate: float, step_stats: Dict) -> None:
    row["images_per_sec"] = rate
    row["images_per_sec_ci95_low"], row["images_per_sec_ci95_high"] = rate_interval(rate, step_stats)
    for name in STAT_NAMES:
        row[f"step_{name}"] = (step_stats or {}).get(name)


def _cluster_row(run: Run, efficiency: float, root: str) -> Dict:
    row = _base(run, root, "cluster")
    row.update(status=run.status, failed_task=run.failed_task, reason=run.reason if not run.ok else "")
    if run.ok:
        _metrics(row, run.images_per_sec, run.step_stats)
        row["global_batch_size"] = run.global_batch
        row["scaling_efficiency"] = efficiency
    split = (run.cluster or {}).get("step_breakdown") or {}
    for part, value in (split.get("mean_s") or {}).items():  # mean per global step, as in summary.md
        row[f"split_{part}_ms"] = value * 1e3
    if split:
        row["split_source"] = split.get("source")
    _extras(row, run.cluster or {})
    return row


def _task_row(run: Run, task: Dict, resources: Dict, root: str) -> Dict:
    row = _base(run, root, "task")
    name = f"{task.get('role')}_{task.get('index')}"
    row.update(status=run.status, task=name, role=task.get("role"), index=task.get("index"))
    _metrics(row, task.get("images_per_sec", float("nan")), task.get("stats"))
    if "resources" not in task and name in resources:
        row.update(_flat("resources", resources[name]))
    _extras(row, task)
    return row


def _extras(row: Dict, record: Dict) -> None:
    """Every other record field, flattened; a field never overrides a column already set."""
    for key, value in record.items():
        if key in _HANDLED:
            continue
        for column, v in _flat(key, value).items():
            row.setdefault(column, v)


def _flat(prefix: str, value) -> Dict:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(_flat(f"{prefix}.{k}", v))
        return out
    if isinstance(value, (list, tuple)):
        return {prefix: " ".join(str(v) for v in value)}
    return {prefix: value}


def columns(all_rows: Iterable[Dict]) -> List[str]:
    """Lead, config and metric columns in a fixed order, then every other column sorted."""
    present = set()
    for row in all_rows:
        present.update(row)
    fixed = [c for c in dict.fromkeys(LEAD + CONFIG + METRICS) if c in present]
    return fixed + sorted(present - set(fixed))


def write(path: str, all_rows: List[Dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns(all_rows), restval="")
        writer.writeheader()
        for row in all_rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
