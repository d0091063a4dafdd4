"""Runs -> results.csv: one row per cluster record, per task record, and per monitored task
without a record of its own (a ps, horovodrun), the run's config flattened in.

Its columns are fixed for a results format version and tfbench's flags (docs/results.md lists
each): every row of every file has all of them, in the same order, whatever the runs hold; a
value a record lacks is blank. A new flag adds its config column; any other change of columns
is a new SCHEMA_VERSION. Lists are joined with spaces; nested record fields are named by dotted paths.
"""
from __future__ import annotations

import csv
import os
from typing import Dict, List, Sequence

import tfbench.config as config_lib
from tfbench.measure.breakdown import PARTS
from tfbench.results import records
from tfbench.results.records import SCHEMA_VERSION
from tools.report.aggregate import rate_interval
from tools.rundirs.runs import Run

LEAD = ("schema_version", "run_id", "run_dir", "kind", "status", "task", "role", "index", "failed_task", "reason")
CONFIG = config_lib.RunConfig.names()
STAT_NAMES = ("count", "mean_s", "median_s", "p90_s", "std_s", "ci95_s", "jitter_s", "min_s", "max_s")
# rate_per_sec: in the row's unit (images, examples or tokens: tfbench.workloads), with its 95% CI;
# examples_per_sec always, images_per_sec and tokens_per_sec where they are the unit.
METRICS = ("global_batch_size", "unit", "rate_per_sec", "rate_per_sec_ci95_low", "rate_per_sec_ci95_high",
           "examples_per_sec", "images_per_sec", "tokens_per_sec", "scaling_efficiency", "examples", "window_s",
           "num_measured_steps") + tuple(f"step_{s}" for s in STAT_NAMES)
SPLIT_PARTS = PARTS + ("pull", "push")  # pull and push: a parameter server's communication, split
SPLIT = tuple(f"split_{part}_ms" for part in SPLIT_PARTS) + ("split_source",)
# Record fields copied as they are (dotted: a field of a nested object).
RECORD = ("step_label", "num_tasks", "cores_per_worker", "updates", "updates_per_sec", "launcher", "network",
          "slurm_job_id", "slurm_job_state", "slurm_exit_code", "host", "slurm_node", "pid", "cores",
          "shares_cores_with", "intra_threads", "inter_threads", "replicas", "local_replicas", "idleness",
          "staleness.mean", "staleness.max", "clock_staleness.mean", "clock_staleness.max",
          "convergence.final_accuracy", "convergence.best_accuracy", "convergence.time_to_accuracy_s",
          "flops.achieved_flops_per_s", "flops.fraction_of_peak", "startup.total_s", "step_times_s")
RESOURCES = ("cpu_percent_mean", "rss_mb_peak", "net_tx_bytes", "net_rx_bytes")
COLUMNS = LEAD + CONFIG + METRICS + SPLIT + RECORD + tuple(f"resources.{k}" for k in RESOURCES)


def rows(runs: Sequence[Run], efficiency: Dict[str, float], root: str) -> List[Dict]:
    """Cluster rows (with scaling efficiency) followed by their runs' task rows."""
    result = []
    for run in runs:
        result.append(_cluster_row(run, efficiency.get(run.path, float("nan")), root))
        resources = run.task_resources
        for task in run.tasks:
            result.append(_task_row(run, task, resources, root))
        recorded = {f"{t.get('role')}_{t.get('index')}" for t in run.tasks}
        for name, figures in resources.items():  # a ps or horovodrun: monitored, no record of its own
            if name not in recorded:
                result.append(_monitored_row(run, name, figures, root))
    return result


def _base(run: Run, root: str, kind: str) -> Dict:
    row = {"schema_version": SCHEMA_VERSION, "run_id": run.run_id, "run_dir": os.path.relpath(run.path, root),
           "kind": kind}
    for name in CONFIG:
        value = run.config.get(name)
        row[name] = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value
    return row


def _metrics(row: Dict, record: Dict, step_stats: Dict) -> None:
    rate = records.unit_rate(record)
    row["unit"] = records.unit_of(record)
    row["rate_per_sec"] = rate
    row["rate_per_sec_ci95_low"], row["rate_per_sec_ci95_high"] = rate_interval(rate, step_stats)
    for key in ("examples_per_sec", "images_per_sec", "tokens_per_sec"):
        row[key] = record.get(key)
    for name in STAT_NAMES:
        row[f"step_{name}"] = (step_stats or {}).get(name)


def _cluster_row(run: Run, efficiency: float, root: str) -> Dict:
    row = _base(run, root, "cluster")
    row.update(status=run.status, failed_task=run.failed_task, reason=run.reason if not run.ok else "")
    if run.ok:
        _metrics(row, run.cluster, run.step_stats)
        row["global_batch_size"] = run.global_batch
        row["scaling_efficiency"] = efficiency
    cluster = run.cluster or {}
    for key in ("examples", "window_s"):
        row[key] = cluster.get(key, cluster.get("images") if key == "examples" else None)
    split = cluster.get("step_breakdown") or {}
    mean = split.get("mean_s") or {}
    for part in SPLIT_PARTS:  # mean per global step, as in summary.md
        row[f"split_{part}_ms"] = mean[part] * 1e3 if mean.get(part) is not None else None
    if split:
        row["split_source"] = split.get("source")
    _copy(row, cluster)
    workers = ((cluster.get("resources") or {}).get("workers_mean") or {})
    row.update({f"resources.{k}": workers.get(k) for k in RESOURCES})
    return row


def _task_row(run: Run, task: Dict, resources: Dict, root: str) -> Dict:
    row = _base(run, root, "task")
    name = f"{task.get('role')}_{task.get('index')}"
    row.update(status=run.status, task=name, role=task.get("role"), index=task.get("index"),
               global_batch_size=task.get("global_batch_size"), num_measured_steps=task.get("num_measured_steps"))
    _metrics(row, task, task.get("stats"))
    _copy(row, task)
    figures = task.get("resources") or resources.get(name) or {}
    row.update({f"resources.{k}": figures.get(k) for k in RESOURCES})
    return row


def _monitored_row(run: Run, name: str, figures: Dict, root: str) -> Dict:
    row = _base(run, root, "task")
    role, _, index = name.rpartition("_")
    row.update(status=run.status, task=name, role=figures.get("role") or role or name,
               index=figures.get("index", int(index) if index.isdigit() else None))
    row.update({f"resources.{k}": figures.get(k) for k in RESOURCES})
    return row


def _copy(row: Dict, record: Dict) -> None:
    """The RECORD columns this record has."""
    for column in RECORD:
        value = record
        for key in column.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, (list, tuple)):
            value = " ".join(str(v) for v in value)
        if value is not None and not isinstance(value, dict):
            row[column] = value


def columns() -> List[str]:
    """The header of results.csv: the same for every file of this format version."""
    return list(COLUMNS)


def write(path: str, all_rows: List[Dict]) -> None:
    header = columns()
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header, restval="", extrasaction="raise")
        writer.writeheader()
        for row in all_rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
