"""Result records: what one task measured, and what the cluster did in the measured window.

results.jsonl is append-only; each line is one record with "kind": "task" or "cluster".
Tasks append their own record (under an advisory lock) so that a launcher that dies later
cannot lose them; the launcher appends the cluster record computed from those. Every record
(and environment.json) carries SCHEMA_VERSION; docs/results.md documents every field.
"""
from __future__ import annotations

import fcntl
import json
import os
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from tfbench.measure import breakdown, comm, elastic_steps, stats

RESULTS_FILE = "results.jsonl"
# The results format's version (docs/results.md): fields may be added within a version; removing,
# renaming or redefining one (its unit, its meaning) or a column of results.csv increments it.
SCHEMA_VERSION = 4


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


def rate_fields(examples_per_sec: float, unit: str, units_per_example: int) -> dict:
    """examples_per_sec always; where the unit is not examples, its own rate too (images_per_sec,
    tokens_per_sec = examples_per_sec x units per example)."""
    out = {"examples_per_sec": examples_per_sec}
    if unit != "examples":
        out[f"{unit}_per_sec"] = examples_per_sec * units_per_example
    return out


def unit_of(record: dict) -> str:
    """The unit a record's rate counts (schema 1 records counted images)."""
    return record.get("unit", "images")


def unit_rate(record: dict) -> float:
    """A task's or cluster's rate in its own unit (images/sec, examples/sec, tokens/sec)."""
    unit = unit_of(record)
    value = record.get(f"{unit}_per_sec", record.get("examples_per_sec"))
    return float(value) if value is not None else float("nan")


def task_record(*, run_id: str, role: str, index: int, examples_per_step: int,
                step_times_s: Sequence[float], step_start_wall: Sequence[float], unit: str = "images",
                units_per_example: int = 1, extra: Optional[Dict] = None) -> dict:
    """The record of one task's measured steps (warm-up steps are never passed in)."""
    rate = stats.examples_per_sec(examples_per_step, step_times_s)
    record = {
        "kind": "task",
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "role": role,
        "index": index,
        "unit": unit,
        "units_per_example": units_per_example,
        "examples_per_step": examples_per_step,
        **({"images_per_step": examples_per_step} if unit == "images" else {}),
        "num_measured_steps": len(step_times_s),
        "step_times_s": [float(t) for t in step_times_s],
        "step_start_wall": [float(t) for t in step_start_wall],
        "stats": stats.step_time_stats(step_times_s),
        **rate_fields(rate, unit, units_per_example),
        "window_start": float(step_start_wall[0]),
        "window_end": float(step_start_wall[-1] + step_times_s[-1]),
    }
    record.update(extra or {})
    return record


def window_resources(summary: dict, start: float, end: float, global_steps: int) -> dict:
    """The monitor's summary -> figures over the measured window ("tasks", "workers_mean", the
    window itself) with the whole-process summary kept apart under "whole_process"."""
    from tfbench.measure.window import measured_window

    whole = dict(summary)
    whole["tasks"] = {name: {k: v for k, v in task.items() if k != "series"}
                      for name, task in summary["tasks"].items()}
    samples = [s for task in summary["tasks"].values() for s in task.get("series") or ()]
    window = measured_window(samples, start, end, global_steps)
    for name, task in whole["tasks"].items():  # every task keeps a row, sampled in the window or not
        window["tasks"].setdefault(name, {"role": task.get("role")})
    return {"scope": "measured window (first measured step start to last measured step end)",
            "tasks": window["tasks"], "workers_mean": window["workers_mean"],
            "window": {"start": start, "end": end, "global_steps": global_steps},
            "host": summary.get("host"), "interval_s": summary.get("interval_s"),
            "network_source": summary.get("network_source"),
            "whole_process": {"scope": "whole process lives: import, tracing, warm-up and teardown included",
                              **whole}}


def measuring_tasks(records: Iterable[dict]) -> List[dict]:
    """Task records that processed examples in the measured window (not the coordinator's own view)."""
    return [r for r in records if r.get("kind") == "task" and r.get("counts_toward_cluster", True)]


UPDATES_PER_SEC = ("parameter-server updates applied in the measured window / the measured window's wall time "
                   "(the window of the cluster's examples/sec)")
SYNC_GLOBAL_STEP = ("global step: first rank's start to last rank's end of the same step "
                    "(one sample per step, not one per rank)")


def cluster_steps(task_records: Sequence[dict]) -> Tuple[List[float], str, str]:
    """The cluster's step series, one time per global step, what it measures, and a short label.

    A task that drives the cluster (the parameter-server coordinator) states its own series
    (`cluster_steps`: sync = gradients from every worker + apply; async = N updates); otherwise
    every measuring task ran the same synchronous steps and stats.global_steps merges them.
    """
    if elastic_steps.applies(task_records):
        return [s.duration for s in elastic_steps.merged(task_records)], elastic_steps.DEFINITION, "global step"
    drivers = [r for r in task_records if r.get("kind") == "task" and r.get("cluster_steps")]
    if drivers:
        driver = drivers[0]
        return (list(driver["step_times_s"]), driver.get("step_definition", "coordinator step"),
                driver.get("step_label", "global step"))
    tasks = measuring_tasks(task_records)
    return (stats.global_steps([r["step_start_wall"] for r in tasks], [r["step_times_s"] for r in tasks]),
            SYNC_GLOBAL_STEP, "global step")


def cores_per_worker(task_records: Sequence[dict]) -> Optional[float]:
    """Cores per worker, when every measuring task had the same (else None). A task holding
    several local replicas (Mirrored's devices, which reports count as its workers) counts
    per replica, so 2 devices on 2 cores compare with 1 device on 1 core."""
    counts = set()
    for r in measuring_tasks(task_records):
        cores, local = len(r.get("cores") or ()), max(1, int(r.get("local_replicas") or 1))
        counts.add(cores // local if cores % local == 0 else cores / local)
    return counts.pop() if len(counts) == 1 else None


def training_dynamics(task_records: Sequence[dict]) -> Dict:
    """What the run learned and how its updates went, lifted from the task records that hold it
    (the evaluating task's convergence; a parameter-server coordinator's updates and staleness;
    each worker's idleness), so that sweeps can compare them without reading task records."""
    out: Dict = {}
    for r in task_records:
        if r.get("kind") != "task":
            continue
        if r.get("convergence"):
            out["convergence"] = r["convergence"]
        if r.get("cluster_steps") and r.get("updates") is not None:
            out["updates"] = r["updates"]  # per second: over the cluster's window (cluster_record)
            if r.get("staleness"):
                out["staleness"] = r["staleness"].get("all")
            for key in ("clock_staleness", "bound_waits", "ps_staleness_bound"):
                if r.get(key) is not None:
                    out[key] = r[key]
        if r.get("idleness") is not None:
            out.setdefault("idleness", {})[f"{r['role']}_{r['index']}"] = r["idleness"]
    return out


def cluster_record(run_id: str, task_records: Sequence[dict], extra: Optional[Dict] = None) -> dict:
    """Cluster examples/sec = all examples in the measured window / the window's wall time (and the
    rate in the workload's unit: images/sec, tokens/sec).

    The window runs from the first measured step's start to the last measured step's end,
    across tasks. Step-time statistics come from one sample per global step (cluster_steps).
    Resource figures are cut to the window when the monitor's summary holds its samples.
    """
    tasks = measuring_tasks(task_records)
    if not tasks:
        raise ValueError("no task measured any step")
    start = min(r["window_start"] for r in tasks)
    end = max(r["window_end"] for r in tasks)
    examples = sum(r["examples_per_step"] * r["num_measured_steps"] for r in tasks)
    steps = elastic_steps.merged(tasks)  # Horovod elastic: a killed rank's steps are in the others' records
    if steps:
        start, end = min(s.start for s in steps), max(s.end for s in steps)
        examples = sum(s.examples for s in steps)
    unit, per_example = unit_of(tasks[0]), tasks[0].get("units_per_example", 1)
    series, definition, label = cluster_steps(task_records)
    record = {
        "kind": "cluster",
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "status": "ok",
        "num_tasks": len(tasks),
        "unit": unit,
        "units_per_example": per_example,
        "examples": examples,
        **({"images": examples} if unit == "images" else {}),
        "window_start": start,
        "window_end": end,
        "window_s": end - start,
        **rate_fields(examples / (end - start) if end > start else float("nan"), unit, per_example),
        "step_times_s": [float(t) for t in series],
        "step_definition": definition,
        "step_label": label,
        "stats": stats.step_time_stats(series),
        "step_breakdown": breakdown.of_run(task_records, series),
        "cores_per_worker": cores_per_worker(task_records),
        "shared_cores": {f"{r['role']}_{r['index']}": r["shares_cores_with"]
                         for r in task_records if r.get("kind") == "task" and r.get("shares_cores_with")},
        "task_examples_per_sec": {f"{r['role']}_{r['index']}": r["examples_per_sec"] for r in tasks},
    }
    communication = comm.of_run(task_records, record["step_breakdown"])
    if communication:
        record["communication"] = communication
    for key in ("workload", "input_pipeline", "compute"):  # what ran, what it read and computed, as the tasks recorded it
        if tasks[0].get(key):
            record[key] = tasks[0][key]
    record.update(training_dynamics(task_records))
    for key in ("workload", "sparse", "ps_row_skew", "optimizer"):  # the same in every task's record
        found = next((r[key] for r in tasks if r.get(key)), None)
        if found:
            record[key] = found
    if record.get("updates") is not None:  # the same window as examples/sec, so the two rates agree
        record["updates_per_sec"] = record["updates"] / (end - start) if end > start else float("nan")
        record["updates_per_sec_definition"] = UPDATES_PER_SEC
    record.update(extra or {})
    resources = record.get("resources")
    if isinstance(resources, dict) and any(isinstance(t, dict) and t.get("series")
                                           for t in (resources.get("tasks") or {}).values()):
        record["resources"] = window_resources(record["resources"], start, end, len(series))
    return record
