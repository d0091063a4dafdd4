"""Turns raw samples into per-sample records and end-of-run summaries.

A task keeps one series across restarts: when the launcher re-adds it with a new pid, traffic
of the earlier processes stays in its cumulative totals and its peak RSS carries over.
Units: memory in MiB (as ps and top), traffic totals in MB (10^6 bytes, as link rates and the
parameter sizes in docs/definitions.md), rates in kilobits per second.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Tuple

from tfbench.monitor.gpu import GpuSample
from tfbench.monitor.host import HostSample, kbps
from tfbench.monitor.netstat import Counts
from tfbench.monitor.process import ProcessTree, TreeSample

MIB = 2 ** 20
MB = 10 ** 6
WINDOW_KEYS = ("time", "task", "role", "cpu_percent", "rss_mb", "net_tx_bytes", "net_rx_bytes")


class TaskSeries:
    def __init__(self, name: str, role: str, index: int, cores: int):
        self.name, self.role, self.index = name, role, index
        self._cores = max(1, cores)
        self.pids: List[int] = []
        self.tree: Optional[ProcessTree] = None
        self.last_pids: Tuple[int, ...] = ()  # the tree as of the last sample
        self._net_earlier: Counts = (0, 0)  # traffic of processes from before a restart
        self._net_by_pid: Dict[int, Counts] = {}  # this incarnation's processes, last known
        self._net_prev: Optional[tuple] = None  # (time, tx, rx) of the previous sample
        self._peak_rss = 0
        self._cpu: List[float] = []
        self._cpu_normalized: List[float] = []
        self._net_seen = False
        self._samples: List[dict] = []  # compact per-sample figures, for measured-window summaries

    def attach(self, pid: int) -> None:
        """Follows a (new) process for this task; totals of the previous one are kept."""
        if self.tree is not None and self.tree.pid == pid and self.tree.alive():
            return
        self._net_earlier = self.net_totals()
        self._net_by_pid = {}
        self.tree = ProcessTree(pid)
        self._net_prev = (self.tree.start_time, *self._net_earlier)
        self.last_pids = ()
        self.pids.append(pid)

    def net_totals(self) -> Counts:
        tx, rx = self._net_earlier
        for ptx, prx in self._net_by_pid.values():
            tx, rx = tx + ptx, rx + prx
        return tx, rx

    def record(self, step: int, now: float, tree: TreeSample, net: Optional[Dict[int, Counts]],
               gpu: Optional[GpuSample]) -> dict:
        cpu_normalized = tree.cpu_percent / self._cores
        self._cpu.append(tree.cpu_percent)
        self._cpu_normalized.append(cpu_normalized)
        self._peak_rss = max(self._peak_rss, tree.peak_rss_bytes)
        rec = {
            "time": now, "sample": step, "task": self.name, "role": self.role, "index": self.index,
            "cpu_percent": tree.cpu_percent, "cpu_percent_normalized": cpu_normalized,
            "rss_mb": tree.rss_bytes / MIB, "peak_rss_mb": self._peak_rss / MIB,
            "threads": tree.threads,
            "net_tx_bytes": None, "net_rx_bytes": None, "net_tx_kbps": None, "net_rx_kbps": None,
        }
        self.last_pids = tree.pids
        if net is not None:
            tx, rx = self.take_traffic(tree.pids, net)
            prev_time, prev_tx, prev_rx = self._net_prev or (now, tx, rx)
            rec.update(net_tx_bytes=tx, net_rx_bytes=rx,
                       net_tx_kbps=kbps(tx - prev_tx, now - prev_time),
                       net_rx_kbps=kbps(rx - prev_rx, now - prev_time))
            self._net_prev = (now, tx, rx)
        if gpu is not None:
            rec["gpu_mem_mb"] = sum(gpu.process_mem_bytes.get(pid, 0) for pid in tree.pids) / MIB
        self._samples.append({key: rec[key] for key in WINDOW_KEYS})
        return rec

    def take_traffic(self, pids, net: Dict[int, Counts]) -> Counts:
        """Updates the last-known traffic of this task's processes; returns the task's totals."""
        self._net_seen = True
        for pid in pids:
            if pid in net:
                self._net_by_pid[pid] = net[pid]
        return self.net_totals()

    def summary(self) -> dict:
        tx, rx = self.net_totals() if self._net_seen else (None, None)
        return {
            "role": self.role, "index": self.index, "pids": list(self.pids),
            "samples": len(self._cpu),
            "cpu_percent_mean": _mean(self._cpu),
            "cpu_percent_normalized_mean": _mean(self._cpu_normalized),
            "rss_mb_peak": self._peak_rss / MIB if self._cpu else None,
            "net_tx_bytes": tx, "net_rx_bytes": rx,
            "series": list(self._samples),  # cut to the measured window in the cluster record
        }


class HostSeries:
    def __init__(self):
        self._cpu: List[float] = []
        self._mem_peak = 0
        self._nics: Dict[str, dict] = {}
        self._gpu_util: Dict[int, List[float]] = {}

    def record(self, step: int, now: float, host: HostSample, gpu: Optional[GpuSample]) -> dict:
        self._cpu.append(host.cpu_percent)
        self._mem_peak = max(self._mem_peak, host.mem_used_bytes)
        nics = {name: {"tx_bytes": n.tx_bytes, "rx_bytes": n.rx_bytes,
                       "tx_kbps": n.tx_kbps, "rx_kbps": n.rx_kbps} for name, n in host.nics.items()}
        self._nics = nics
        rec = {"time": now, "sample": step, "task": "host", "role": "host", "index": 0,
               "cpu_percent": host.cpu_percent, "mem_used_mb": host.mem_used_bytes / MIB,
               "mem_total_mb": host.mem_total_bytes / MIB, "net": nics}
        if gpu is not None:
            rec["gpus"] = [{"index": d.index, "util_percent": d.util_percent,
                            "mem_used_mb": d.mem_used_bytes / MIB} for d in gpu.devices]
            for d in gpu.devices:
                self._gpu_util.setdefault(d.index, []).append(d.util_percent)
        return rec

    def summary(self) -> dict:
        out = {
            "samples": len(self._cpu),
            "cpu_percent_mean": _mean(self._cpu),
            "mem_used_mb_peak": self._mem_peak / MIB if self._cpu else None,
            "net": {name: {"tx_bytes": n["tx_bytes"], "rx_bytes": n["rx_bytes"]}
                    for name, n in self._nics.items()},
        }
        if self._gpu_util:
            out["gpu_util_percent_mean"] = {str(i): _mean(v) for i, v in self._gpu_util.items()}
        return out


def workers_mean(summaries: List[dict]) -> dict:
    """The workers' summaries averaged key by key (ps and coordinator stay apart)."""
    keys = ("samples", "cpu_percent_mean", "cpu_percent_normalized_mean", "rss_mb_peak",
            "net_tx_bytes", "net_rx_bytes")
    out = {"tasks": len(summaries)}
    for key in keys:
        out[key] = _mean([s[key] for s in summaries if s.get(key) is not None])
    return out


def _mean(values: List[float]) -> Optional[float]:
    return float(statistics.fmean(values)) if values else None
