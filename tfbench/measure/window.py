"""Resource figures over the measured window, from the monitor's per-task samples.

The monitor samples from process start to teardown, so its own totals include TensorFlow's
import, tracing, warm-up and shutdown. A run's resource figures follow docs/definitions.md instead: CPU,
memory and bytes between the first measured step's start and the last measured step's end.
Each CPU sample is the mean since the previous one, so it is weighted by how much of its
interval lies in the window; cumulative byte counters are interpolated linearly at both ends.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

MB = 10 ** 6


def _at(points: Sequence[Tuple[float, float]], t: float) -> Optional[float]:
    """A cumulative counter at time t, linearly interpolated; None outside the samples."""
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return points[-1][1]


def task_window(samples: Sequence[dict], start: float, end: float) -> dict:
    """One task's figures over [start, end] from its monitor samples (ordered by time)."""
    samples = sorted(samples, key=lambda s: s["time"])
    weighted, covered, rss = 0.0, 0.0, []
    previous = None
    for s in samples:
        t = s["time"]
        t_prev = previous["time"] if previous is not None else t
        overlap = max(0.0, min(t, end) - max(t_prev, start))
        if overlap > 0 and s.get("cpu_percent") is not None:
            weighted += s["cpu_percent"] * overlap
            covered += overlap
        if start <= t <= end or overlap > 0:
            if s.get("rss_mb") is not None:
                rss.append(s["rss_mb"])
        previous = s
    out = {
        "samples_in_window": sum(1 for s in samples if start <= s["time"] <= end),
        "cpu_percent_mean": weighted / covered if covered > 0 else None,
        "cpu_coverage": covered / (end - start) if end > start else None,
        "rss_mb_peak": max(rss) if rss else None,
    }
    for key in ("net_tx_bytes", "net_rx_bytes"):
        points = [(s["time"], float(s[key])) for s in samples if s.get(key) is not None]
        a, b = _at(points, start), _at(points, end)
        out[key] = b - a if a is not None and b is not None else None
    return out


def measured_window(samples: Iterable[dict], start: float, end: float, steps: int) -> dict:
    """Per-task figures over the measured window, the workers' mean, and bytes per global step.

    A figure the samples cannot cover (the window lies outside them, e.g. a run shorter than
    one monitor interval) is None rather than a guess."""
    by_task: Dict[str, List[dict]] = {}
    roles: Dict[str, str] = {}
    for s in samples:
        if s.get("role") == "host" or "task" not in s:
            continue
        by_task.setdefault(s["task"], []).append(s)
        roles[s["task"]] = s.get("role", "")
    tasks = {}
    for name, task_samples in by_task.items():
        figures = task_window(task_samples, start, end)
        figures["role"] = roles[name]
        if steps > 0:
            for key in ("net_tx_bytes", "net_rx_bytes"):
                value = figures[key]
                figures[key.replace("_bytes", "_bytes_per_step")] = value / steps if value is not None else None
        tasks[name] = figures
    workers = [f for f in tasks.values() if f["role"] == "worker"]
    mean = {}
    for key in ("cpu_percent_mean", "rss_mb_peak", "net_tx_bytes", "net_rx_bytes"):
        values = [f[key] for f in workers if f.get(key) is not None]
        mean[key] = sum(values) / len(values) if values else None
    return {"start": start, "end": end, "global_steps": steps, "tasks": tasks,
            "workers_mean": dict(mean, tasks=len(workers))}
