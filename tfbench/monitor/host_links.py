"""Traffic of each emulated host's link, as the studies measured it: interface counters, sampled.

On an emulated run each host's whole traffic crosses its one link, so the counters of the
host's port on the run's switch are that host's traffic (what the port receives, the host
sent). One netlink dump in the switch namespace reads every port. Each sample goes to
TensorBoard under tb/host_<h>/ (link/tx_kbps, link/rx_kbps, link/tx_mb_total, link/rx_mb_total,
on the monitor's step axis and wall clock) and to links.jsonl; window_traffic() turns those
into totals over the measured window and bytes per global step. Runs without network.json
(written by the emulated launcher) have no host links: HostLinks.from_run returns None.
"""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Tuple

from tfbench.monitor.host import kbps
from tfbench.results.rundir import RunDir
from tfbench.tensorboard.events import EventWriter

NETWORK_FILE = "network.json"
LINKS_FILE = "links.jsonl"
MB = 10 ** 6
MIN_WINDOW_SAMPLES = 3  # fewer inside the measured window: its totals are mostly interpolation


def tb_name(host: str) -> str:
    return f"host_{host}"


class HostLinks:
    def __init__(self, run: RunDir, network: dict):
        from pyroute2 import NetNS

        self._run = run
        self._ports = {h["port"]: h for h in network["hosts"]}
        self._ns = NetNS(network["switch"], flags=0)
        self._writers: Dict[str, EventWriter] = {}
        self._jsonl = open(run.file(LINKS_FILE), "a", encoding="utf-8")
        self._start: Dict[str, Tuple[int, int]] = {}
        self._last: Dict[str, Tuple[float, int, int]] = {}
        self._peak: Dict[str, List[float]] = {}

    @classmethod
    def from_run(cls, run: RunDir) -> Optional["HostLinks"]:
        if not os.path.exists(run.file(NETWORK_FILE)):
            return None
        return cls(run, run.read_json(NETWORK_FILE))

    def _counters(self) -> Dict[str, Tuple[int, int]]:
        """{port: (host tx bytes, host rx bytes)}."""
        out = {}
        for link in self._ns.get_links():
            name, stats = link.get_attr("IFLA_IFNAME"), link.get_attr("IFLA_STATS64")
            if name in self._ports and stats is not None:
                out[name] = (int(stats["rx_bytes"]), int(stats["tx_bytes"]))
        return out

    def sample(self, now: float, step: int, write_events: bool = True) -> None:
        """One sample of every link; the first one is the zero all totals count from."""
        for port, (tx, rx) in self._counters().items():
            start_tx, start_rx = self._start.setdefault(port, (tx, rx))
            tx, rx = tx - start_tx, rx - start_rx
            last_time, last_tx, last_rx = self._last.get(port, (now, tx, rx))
            rec = {"time": now, "sample": step, "host": port, "address": self._ports[port]["address"],
                   "tx_bytes": tx, "rx_bytes": rx,
                   "tx_kbps": kbps(tx - last_tx, now - last_time), "rx_kbps": kbps(rx - last_rx, now - last_time)}
            self._last[port] = (now, tx, rx)
            peak = self._peak.setdefault(port, [0.0, 0.0])
            peak[0], peak[1] = max(peak[0], rec["tx_kbps"]), max(peak[1], rec["rx_kbps"])
            self._jsonl.write(json.dumps(rec, sort_keys=True) + "\n")
            if write_events:
                self._writer(port).scalars({"link/tx_kbps": rec["tx_kbps"], "link/rx_kbps": rec["rx_kbps"],
                                            "link/tx_mb_total": tx / MB, "link/rx_mb_total": rx / MB}, step, now)
        self._jsonl.flush()

    def _writer(self, host: str) -> EventWriter:
        if host not in self._writers:
            self._writers[host] = EventWriter(self._run.task_tb(tb_name(host)), suffix=".sys")
        return self._writers[host]

    def summary(self) -> dict:
        """Whole-run totals per host (window totals: window_traffic)."""
        return {port: {"address": self._ports[port]["address"], "tx_bytes": tx, "rx_bytes": rx,
                       "tx_kbps_peak": self._peak[port][0], "rx_kbps_peak": self._peak[port][1]}
                for port, (_, tx, rx) in sorted(self._last.items())}

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._jsonl.close()
        self._ns.close()


def read_samples(run: RunDir) -> Dict[str, List[dict]]:
    """links.jsonl per host, in time order."""
    by_host: Dict[str, List[dict]] = {}
    try:
        with open(run.file(LINKS_FILE), encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                by_host.setdefault(rec["host"], []).append(rec)
    except FileNotFoundError:
        return {}
    return {h: sorted(recs, key=lambda r: r["time"]) for h, recs in by_host.items()}


def _at(samples: List[dict], t: float, key: str) -> float:
    """Cumulative bytes at time t, linear between the samples around it (clamped at the ends)."""
    if t <= samples[0]["time"]:
        return samples[0][key]
    for a, b in zip(samples, samples[1:]):
        if a["time"] <= t <= b["time"]:
            span = b["time"] - a["time"]
            return a[key] + (b[key] - a[key]) * ((t - a["time"]) / span if span > 0 else 1.0)
    return samples[-1][key]


def window_traffic(run: RunDir, start: float, end: float, global_steps: int) -> dict:
    """Each host's bytes sent and received in [start, end] (cumulative counters interpolated
    between samples), per second, and per global step."""
    out = {}
    seconds = end - start
    for host, samples in read_samples(run).items():
        tx = _at(samples, end, "tx_bytes") - _at(samples, start, "tx_bytes")
        rx = _at(samples, end, "rx_bytes") - _at(samples, start, "rx_bytes")
        inside = sum(1 for s in samples if start <= s["time"] <= end)
        out[host] = {"address": samples[0]["address"], "tx_bytes": tx, "rx_bytes": rx,
                     "tx_mbit_per_s": tx * 8 / 1e6 / seconds if seconds > 0 else None,
                     "rx_mbit_per_s": rx * 8 / 1e6 / seconds if seconds > 0 else None,
                     "tx_bytes_per_step": tx / global_steps, "rx_bytes_per_step": rx / global_steps,
                     "samples_in_window": inside}
        if inside < MIN_WINDOW_SAMPLES:  # the edges' traffic is a straight line between samples
            out[host]["approximate"] = (
                f"{inside} counter sample(s) inside the {seconds:.2f} s measured window: its bytes are "
                "interpolated from samples outside it; lower --monitor_interval or raise --num_steps")
    return out
