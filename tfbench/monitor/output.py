"""Writes monitor records as TensorBoard events and as monitor.jsonl in the run directory.

Events use the sample's wall time and, as step, milliseconds since the run began
(tfbench.tensorboard.timeline), the same axis as the tasks' step-time events. Each task's series goes to tb/<task>/ next to its step times;
the workers' series are also averaged into tb/workers_mean/, while ps and the coordinator keep
only their own directories (docs/definitions.md). Files carry a ".sys" suffix; TensorBoard follows
several live files in one directory with --reload_multifile=true.
"""
from __future__ import annotations

import json
import re
import threading
from typing import Dict, List, Set

from tfbench.monitor.series import MB
from tfbench.results.rundir import RunDir
from tfbench.tensorboard.events import EventWriter

MONITOR_FILE = "monitor.jsonl"
WORKERS_MEAN = "workers_mean"
HOST = "host"
_TASK_TAGS = ("cpu_percent", "cpu_percent_normalized", "rss_mb", "peak_rss_mb", "threads",
              "net_tx_kbps", "net_rx_kbps", "gpu_mem_mb")


def task_scalars(rec: dict) -> Dict[str, float]:
    values = {f"sys/{key}": rec[key] for key in _TASK_TAGS if rec.get(key) is not None}
    if rec.get("net_tx_bytes") is not None:
        values["sys/net_tx_mb_total"] = rec["net_tx_bytes"] / MB
        values["sys/net_rx_mb_total"] = rec["net_rx_bytes"] / MB
    return values


# An interface is charted from the first sample in which it carries this much either way: an
# idle one (the machine's own eth0 while an emulated run talks over its namespaces' links, or
# a few bytes of background traffic) would open TensorBoard on flat zeros.
ACTIVE_KBPS = 16.0


def host_scalars(rec: dict, interfaces=None) -> Dict[str, float]:
    """The host's series; `interfaces`: the names whose traffic to chart (None: every one that
    carried any)."""
    values = {"host/cpu_percent": rec["cpu_percent"], "host/mem_used_mb": rec["mem_used_mb"]}
    for name, nic in rec["net"].items():
        if not nic["tx_bytes"] and not nic["rx_bytes"]:
            continue  # an interface that carried none of the run's traffic (yet)
        if interfaces is not None and name not in interfaces:
            continue
        tag = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        values[f"host/net_{tag}_tx_kbps"] = nic["tx_kbps"]
        values[f"host/net_{tag}_rx_kbps"] = nic["rx_kbps"]
        values[f"host/net_{tag}_tx_mb_total"] = nic["tx_bytes"] / MB
        values[f"host/net_{tag}_rx_mb_total"] = nic["rx_bytes"] / MB
    for gpu in rec.get("gpus", ()):
        values[f"host/gpu{gpu['index']}_util_percent"] = gpu["util_percent"]
        values[f"host/gpu{gpu['index']}_mem_used_mb"] = gpu["mem_used_mb"]
    return values


def active_interfaces(rec: dict, seen: Set[str]) -> Set[str]:
    """`seen` plus the interfaces that carry at least ACTIVE_KBPS in this sample: once charted,
    an interface stays charted, so its series has no gaps."""
    return seen | {name for name, nic in rec["net"].items()
                   if max(nic["tx_kbps"], nic["rx_kbps"]) >= ACTIVE_KBPS}


def mean_scalars(per_task: List[Dict[str, float]]) -> Dict[str, float]:
    """Tag-wise mean over the tasks that reported the tag in this sample."""
    sums: Dict[str, List[float]] = {}
    for values in per_task:
        for tag, value in values.items():
            sums.setdefault(tag, []).append(value)
    return {tag: sum(v) / len(v) for tag, v in sums.items()}


class MonitorOutput:
    """`host_interfaces`: chart this machine's interfaces at all (not when the run's tasks talk
    over network namespaces of their own, whose traffic these interfaces never see); monitor.jsonl
    keeps every interface either way."""

    def __init__(self, run: RunDir, host_interfaces: bool = True):
        self._run = run
        self._host_interfaces = host_interfaces
        self._active: Set[str] = set()
        self._writers: Dict[str, EventWriter] = {}
        self._jsonl = open(run.file(MONITOR_FILE), "a", encoding="utf-8")
        self._lock = threading.Lock()

    def _writer(self, name: str) -> EventWriter:
        if name not in self._writers:
            self._writers[name] = EventWriter(self._run.task_tb(name), suffix=".sys")
        return self._writers[name]

    def write(self, step: int, now: float, tasks: List[dict], host: dict) -> None:
        with self._lock:
            if self._jsonl.closed:
                return
            workers = []
            for rec in tasks:
                values = task_scalars(rec)
                self._writer(rec["task"]).scalars(values, step, now)
                if rec["role"] == "worker":
                    workers.append(values)
            if workers:
                self._writer(WORKERS_MEAN).scalars(mean_scalars(workers), step, now)
            if self._host_interfaces:
                self._active = active_interfaces(host, self._active)
            self._writer(HOST).scalars(host_scalars(host, self._active), step, now)
            for rec in tasks + [host]:
                self._jsonl.write(json.dumps(rec, sort_keys=True) + "\n")
            self._jsonl.flush()

    def close(self) -> None:
        with self._lock:
            for writer in self._writers.values():
                writer.close()
            self._jsonl.close()
