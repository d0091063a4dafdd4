"""PNG plots of points (throughput, step time, scaling) and of one run's resource samples.

Each plot is a grid of panels (e.g. mode × batch) with one line per series (e.g. strategy);
config values that differ between lines of a panel are added to their labels so that no two
lines look alike. Matplotlib runs headless (Agg).
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

from tools.aggregate import Point, order_key  # noqa: E402
from tools.runs import Run  # noqa: E402

_PANEL_TITLES: Dict[str, Callable] = {
    "mode": str,
    "strategy": str,
    "batch_size": lambda v: f"batch {v}/replica",
}
ROLES = ("chief", "worker", "ps", "evaluator")
RESOURCE_METRICS = (("cpu_percent", "CPU % (100 = one core)"), ("rss_mb", "RSS (MB)"),
                    ("net_tx_kbps", "network tx (kbps)"), ("net_rx_kbps", "network rx (kbps)"))


def images_per_sec_vs_workers(points: Sequence[Point], path: str) -> bool:
    """Cluster images/sec against workers, one line per strategy, 95% CI bars."""
    def err(p: Point) -> Tuple[float, float]:
        low, high = p.interval
        return p.images_per_sec - low, high - p.images_per_sec

    return _line_plot(points, path, panels=("mode", "batch_size"), x="scale", series="strategy",
                      y=lambda p: p.images_per_sec, yerr=err, xlabel="workers", ylabel="cluster images/sec",
                      title="Throughput vs workers (error bars: 95% CI, between runs when repeated)")


def seconds_per_batch(points: Sequence[Point], path: str) -> bool:
    """Mean step time against per-replica batch, one line per cluster size."""
    def err(p: Point) -> Tuple[float, float]:
        ci = (p.stats or {}).get("ci95_s", float("nan"))
        return ci, ci

    return _line_plot(points, path, panels=("mode", "strategy"), x="batch_size", series="scale",
                      y=lambda p: (p.stats or {}).get("mean_s", float("nan")), yerr=err,
                      xlabel="batch per replica", ylabel="seconds per global step (mean)",
                      title="Seconds per batch vs batch size (error bars: 95% CI)",
                      series_label=lambda n: f"{n} worker" + ("s" if n != 1 else ""), log2_x=True)


def scaling_efficiency(points: Sequence[Point], path: str) -> bool:
    """Scaling efficiency against workers, one line per strategy; 1.0 is linear scaling."""
    return _line_plot(points, path, panels=("mode", "batch_size"), x="scale", series="strategy",
                      y=lambda p: p.efficiency, yerr=None, xlabel="workers",
                      ylabel="scaling efficiency", title="Scaling efficiency vs workers (1.0 = linear)",
                      reference=1.0)


def _line_plot(points: Sequence[Point], path: str, *, panels: Tuple[str, str], x: str, series: str,
               y: Callable[[Point], float], yerr: Optional[Callable[[Point], Tuple[float, float]]],
               xlabel: str, ylabel: str, title: str, series_label: Callable = str,
               reference: Optional[float] = None, log2_x: bool = False) -> bool:
    points = [p for p in points if _finite(y(p))]
    if not points:
        return False
    rows = sorted({p.config.get(panels[0]) for p in points}, key=str)
    cols = sorted({p.config.get(panels[1]) for p in points}, key=_order)
    fig, axes = plt.subplots(len(rows), len(cols), squeeze=False,
                             figsize=(4.6 * len(cols), 3.4 * len(rows) + 0.6))
    for i, row_value in enumerate(rows):
        for j, col_value in enumerate(cols):
            ax = axes[i][j]
            panel = [p for p in points if p.config.get(panels[0]) == row_value and p.config.get(panels[1]) == col_value]
            if not panel:
                ax.set_visible(False)
                continue
            _draw_lines(ax, panel, x, series, y, yerr, series_label)
            ax.set_title(", ".join(_PANEL_TITLES.get(k, lambda v, k=k: f"{k}={v}")(v)
                                   for k, v in zip(panels, (row_value, col_value))), fontsize=10)
            xs = sorted({p.config.get(x) for p in panel})
            if log2_x:
                ax.set_xscale("log", base=2)
            ax.set_xticks(xs)
            ax.set_xticklabels([str(v) for v in xs])
            if reference is not None:
                ax.axhline(reference, color="gray", linestyle="--", linewidth=1)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _draw_lines(ax, panel: List[Point], x: str, series: str, y, yerr, series_label) -> None:
    """One line per configuration that differs in anything but `x`."""
    lines: Dict[Tuple, List[Point]] = defaultdict(list)
    for p in panel:
        lines[tuple(sorted((k, repr(v)) for k, v in p.config.items() if k != x))].append(p)
    configs = [ps[0].config for ps in lines.values()]
    for line in sorted(lines.values(), key=lambda ps: order_key({**ps[0].config, x: 0})):
        line.sort(key=lambda p: p.config.get(x))
        same_series = [c for c in configs if c.get(series) == line[0].config.get(series)]
        differs = [k for k in sorted(line[0].config) if k not in (x, series)
                   and len({repr(c.get(k)) for c in same_series}) > 1]
        label = ", ".join([series_label(line[0].config.get(series))] +
                          [f"{k}={line[0].config.get(k)}" for k in differs])
        xs = [p.config.get(x) for p in line]
        ys = [y(p) for p in line]
        err = None
        if yerr is not None:
            err = np.array([[_zero_if_bad(e) for e in yerr(p)] for p in line]).T
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)


def resources(run: Run, samples: Sequence[Dict], path: str) -> bool:
    """CPU, memory and network over time: chief, the workers' mean, the ps' mean (host left out)."""
    samples = [s for s in samples if s.get("role") in ROLES]
    if not samples:
        return False
    t0 = min(s["time"] for s in samples)
    interval = float(run.config.get("monitor_interval") or 1.0)
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), sharex=True)
    for role in ROLES:
        mine = [s for s in samples if s.get("role") == role]
        if not mine:
            continue
        tasks = sorted({s["task"] for s in mine})
        label = tasks[0] if len(tasks) == 1 else f"{role}s (mean of {len(tasks)})"
        for ax, (metric, _) in zip(axes.flat, RESOURCE_METRICS):
            buckets: Dict[int, List[float]] = defaultdict(list)
            for s in mine:
                if _finite(s.get(metric)):
                    buckets[round((s["time"] - t0) / interval)].append(float(s[metric]))
            if buckets:
                keys = sorted(buckets)
                ax.plot([k * interval for k in keys], [np.mean(buckets[k]) for k in keys], label=label)
    window = _window(run)
    for ax, (_, ylabel) in zip(axes.flat, RESOURCE_METRICS):
        if window:
            ax.axvspan(window[0] - t0, window[1] - t0, color="gray", alpha=0.15, label="measured window")
        ax.set_ylabel(ylabel)
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("seconds since the first sample")
    c = run.config
    fig.suptitle(f"{run.run_id}: {c.get('strategy')}, {c.get('num_workers')} worker(s), "
                 f"batch {c.get('batch_size')}/replica, {c.get('mode')}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _window(run: Run) -> Optional[Tuple[float, float]]:
    c = run.cluster or {}
    if _finite(c.get("window_start")) and _finite(c.get("window_end")):
        return float(c["window_start"]), float(c["window_end"])
    return None


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _zero_if_bad(value: float) -> float:
    return value if _finite(value) and value >= 0 else 0.0


def _order(value):
    """Numbers in numeric order before strings, so batch 8 comes before 16."""
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))
