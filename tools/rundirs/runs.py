"""Run directories on disk -> Run values: the one place tools learn the layout of a run.

A run directory is any directory holding results.jsonl. Its config comes from config.json,
falling back to the copy in the cluster record; a run with no cluster record was interrupted.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional

import tfbench.config as config_lib
from tfbench.measure import stats
from tfbench.results import records

MONITOR_FILE = "monitor.jsonl"
CONFIG_FILE = "config.json"
PLAN_FILE = "plan.json"
# Subdirectories of a run that never hold runs, and a sweep's tunings (tools.sweep.tune_stage: their
# points are the tuning's, not the sweep's; a report over the tunings folder itself reads them)
_NOT_RUNS = {"tb", "tasks", "report", "tunings"}


@dataclasses.dataclass(frozen=True)
class Run:
    path: str
    config: Dict  # RunConfig.to_dict(), defaults filled in for keys an older run lacks
    cluster: Optional[Dict]
    tasks: List[Dict]  # every task record, evaluators included

    @property
    def run_id(self) -> str:
        return self.config.get("run_id") or os.path.basename(self.path)

    @property
    def run_config(self) -> config_lib.RunConfig:
        return config_lib.RunConfig.from_dict(self.config)

    @property
    def commit(self) -> Optional[str]:
        """The tfbench commit that measured it (environment.json), None when unknown."""
        try:
            with open(os.path.join(self.path, "environment.json"), encoding="utf-8") as f:
                return json.load(f).get("tfbench_commit")
        except (OSError, ValueError):
            return None

    @property
    def status(self) -> str:
        return self.cluster.get("status", "ok") if self.cluster else "incomplete"

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def reason(self) -> str:
        if self.cluster is None:
            return "no cluster record: the run did not finish"
        return str(self.cluster.get("reason", ""))

    @property
    def failed_task(self) -> str:
        return str((self.cluster or {}).get("failed_task", ""))

    @property
    def unit(self) -> str:
        """What the run's rate counts: images, examples or tokens (tfbench.workloads)."""
        return records.unit_of(self.cluster or (self.measuring_tasks or [{}])[0])

    @property
    def rate(self) -> float:
        """The cluster's rate in the run's unit (images/sec, examples/sec, tokens/sec)."""
        return records.unit_rate(self.cluster) if self.ok else float("nan")

    @property
    def measuring_tasks(self) -> List[Dict]:
        return records.measuring_tasks(self.tasks)

    @property
    def step_times_s(self) -> List[float]:
        """One time per global step of the cluster (records.cluster_steps): never every rank's
        copy of the same synchronous step."""
        if self.cluster and self.cluster.get("step_times_s"):
            return list(self.cluster["step_times_s"])
        try:
            return records.cluster_steps(self.tasks)[0] if self.measuring_tasks else []
        except (ValueError, KeyError):  # records from before per-step start times were kept
            return []

    @property
    def step_stats(self) -> Optional[Dict]:
        if self.cluster and self.cluster.get("stats"):
            return self.cluster["stats"]
        times = self.step_times_s
        return stats.step_time_stats(times) if times else None

    @property
    def cores_per_worker(self) -> Optional[int]:
        """Cores per worker of the measuring tasks (0: unpinned; None: unequal), from the task
        records when there are any (the cluster record's copy otherwise)."""
        if self.measuring_tasks or not self.cluster:
            return records.cores_per_worker(self.tasks)
        return self.cluster.get("cores_per_worker")

    @property
    def global_batch(self) -> Optional[int]:
        """Examples per global step: the records' own figure, else the measuring tasks' sum."""
        if self.cluster and self.cluster.get("global_batch_size"):
            return int(self.cluster["global_batch_size"])
        sizes = [r["global_batch_size"] for r in self.measuring_tasks if r.get("global_batch_size")]
        if sizes:
            return int(max(sizes))
        per_step = [r.get("examples_per_step", r.get("images_per_step", 0)) for r in self.measuring_tasks]
        return int(sum(per_step)) if per_step else None

    @property
    def task_resources(self) -> Dict[str, Dict]:
        """Per-task resource summaries (task name -> cpu_percent_mean, rss_mb_peak, net bytes...).

        The launcher stores the monitor's summary, {"tasks": {name: {...}}, "workers_mean": ...,
        "host": ...}; a flat {name: {...}} map is read as well.
        """
        resources = (self.cluster or {}).get("resources") or {}
        tasks = resources.get("tasks") if isinstance(resources.get("tasks"), dict) else resources
        return {name: value for name, value in tasks.items() if isinstance(value, dict)}

    @property
    def placement(self) -> Dict[str, Dict]:
        """task -> the cores and threads its plan (plan.json) gave it; {} without a plan."""
        plan = _read_json(os.path.join(self.path, PLAN_FILE)) or {}
        return {f"{t['role']}_{t['index']}": {"cores": list(t.get("cores") or ()), "intra_threads": t.get("intra_threads"),
                                              "inter_threads": t.get("inter_threads")} for t in plan.get("tasks", ())}

    @property
    def monitor_path(self) -> Optional[str]:
        path = os.path.join(self.path, MONITOR_FILE)
        return path if os.path.exists(path) else None


def find_runs(root: str) -> List[Run]:
    """Every run directory at or below `root`, in path order."""
    runs = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _NOT_RUNS)
        if records.RESULTS_FILE in filenames:
            runs.append(load_run(dirpath))
    return runs


def load_run(path: str) -> Run:
    recs = records.read(os.path.join(path, records.RESULTS_FILE))
    clusters = [r for r in recs if r.get("kind") == "cluster"]
    cluster = clusters[-1] if clusters else None
    config = _read_json(os.path.join(path, CONFIG_FILE)) or (cluster or {}).get("config") or {}
    config = {**config_lib.RunConfig().to_dict(), "run_id": os.path.basename(path), **config}
    tasks = [r for r in recs if r.get("kind") == "task"]
    return Run(path=os.path.abspath(path), config=config, cluster=cluster, tasks=tasks)


def read_monitor(path: str) -> List[Dict]:
    """monitor.jsonl samples; a torn last line is skipped like in results.jsonl."""
    return [r for r in records.read(path) if "task" in r and "time" in r]


def _read_json(path: str) -> Optional[Dict]:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
