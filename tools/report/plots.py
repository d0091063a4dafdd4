"""PNG plots of points (throughput, scaling efficiency, step time) and of one run's resources.

Each point plot is a grid of panels (e.g. mode × batch) with one line per series as
tools.report.plot_lines defines it (e.g. one per strategy, across workers); a line keeps its
colour and marker in every panel and the legend sits below the panels. The *_figure functions return the
matplotlib figure so that tests can read the lines back. Matplotlib runs headless (Agg).
"""
from __future__ import annotations

import itertools
import math
from collections import defaultdict
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import LogFormatter, NullFormatter, PercentFormatter  # noqa: E402

from tfbench.config import STRATEGIES, strategy_traits  # noqa: E402
from tools.report import plot_lines  # noqa: E402
from tools.report.aggregate import Point, rate_label  # noqa: E402
from tools.rundirs.runs import Run  # noqa: E402

ROLES = ("chief", "worker", "ps", "evaluator")
RESOURCE_METRICS = (("cpu_percent", "CPU % (100 = one core)"), ("rss_mb", "RSS (MB)"),
                    ("net_tx_kbps", "network tx (kbps)"), ("net_rx_kbps", "network rx (kbps)"))
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_CI_NOTE = "error bars: 95% CI across repeats"
_NO_CI_NOTE = "one run per point: no error bars"


def throughput_vs_workers(points: Sequence[Point], path: str) -> bool:
    return save(throughput_figure(points), path)


def scaling_efficiency(points: Sequence[Point], path: str) -> bool:
    return save(efficiency_figure(points), path)


def seconds_per_batch(points: Sequence[Point], path: str) -> bool:
    return save(step_time_figure(points), path)


def throughput_figure(points: Sequence[Point]) -> Optional[Figure]:
    """Cluster rate (in the workload's unit) against workers, one line per strategy (and per other differing axis),
    dashed: ideal scaling from the line's own 1-worker rate; error bars from repeats."""
    points = [p for p in points if _finite(p.rate)]
    groups = plot_lines.panels(points, x=plot_lines.SCALE, panel_keys=plot_lines.SCALING_PANELS, primary="strategy")
    bars = _CI_NOTE if any(len(p.runs) > 1 for p in points) else _NO_CI_NOTE
    if points and not any(len(line.points) > 1 for g in groups for line in g.lines):
        return _bar_figure(groups, title=f"Cluster throughput at one worker count: no scaling curve\n({bars})",
                           ylabel=f"cluster {rate_label(points)}", y=lambda p: p.rate, yerr=_repeat_error)
    return line_figure(groups, title=f"Cluster throughput vs workers (dashed: ideal scaling; {bars})",
                   xlabel=_workers_axis(points), ylabel=f"cluster {rate_label(points)}",
                   y=lambda p: p.rate, yerr=_repeat_error, ideal=True)


def efficiency_figure(points: Sequence[Point]) -> Optional[Figure]:
    """Scaling efficiency against workers, one line per strategy; 100% is linear scaling."""
    points = [p for p in points if _finite(p.efficiency)]
    groups = plot_lines.panels(points, x=plot_lines.SCALE, panel_keys=plot_lines.SCALING_PANELS, primary="strategy")
    for group in groups:  # a line measured at 1 worker only is 100% by definition: nothing to show
        group.lines = [line for line in group.lines if line.xs != [1]]
    return line_figure(groups, title="Scaling efficiency vs workers: rate at N ÷ (N × rate at 1)",
                   xlabel=_workers_axis(points), ylabel="scaling efficiency", y=lambda p: p.efficiency,
                   percent=True)


def step_time_figure(points: Sequence[Point]) -> Optional[Figure]:
    """Mean step time against per-replica batch, one panel per mode and worker count, one line
    per strategy (drawn only when the data hold more than one batch size)."""
    points = [p for p in points if _finite((p.stats or {}).get("mean_s"))]
    groups = plot_lines.panels(points, x="batch_size", panel_keys=("mode", plot_lines.SCALE), primary="strategy")
    mirrored = "; mirrored: local devices count as workers" if _has_mirrored(points) else ""
    batch = "images" if {p.unit for p in points} == {"images"} else "examples"  # a batch counts examples
    return line_figure(groups, title=f"Step time vs batch size (error bars: step-time 95% CI{mirrored})",
                   xlabel=f"batch per replica ({batch})", ylabel="mean global step time (s)",
                   y=lambda p: p.stats["mean_s"], yerr=step_error)


def line_figure(groups: List[plot_lines.Panel], *, title: str, xlabel: str, ylabel: str, y: Callable[[Point], float],
            yerr: Optional[Callable[[Point], Tuple[float, float]]] = None, ideal: bool = False,
            percent: bool = False) -> Optional[Figure]:
    """A grid of panels, one colour and marker per line label across all panels, and one legend
    below the panels (never over the data). None when no line has two points to join."""
    groups = [g for g in groups if g.lines]
    if not any(len(line.points) > 1 for g in groups for line in g.lines):
        return None
    labels = list(dict.fromkeys(line.label for g in groups for line in g.lines))
    colors, markers = _styles(labels)
    fig, axes = _grid(groups)
    for group, ax in zip(groups, axes):
        for line in group.lines:
            color = colors[line.label]
            ax.plot(line.xs, [y(p) for p in line.points], color=color, marker=markers[line.label],
                    label=line.label, gid="series")
            if yerr is not None:
                err = np.array([[_zero_if_bad(e) for e in yerr(p)] for p in line.points]).T
                if err.any():
                    ax.errorbar(line.xs, [y(p) for p in line.points], yerr=err, fmt="none", ecolor=color,
                                capsize=3, label="_error bars")
            one = line.at(1)
            if ideal and one is not None and len(line.points) > 1:
                ax.plot(line.xs, [y(one) * n for n in line.xs], color=color, linestyle="--", linewidth=1,
                        alpha=0.6, label="_ideal", gid="ideal")
        _axes(ax, group, xlabel, ylabel, percent, [y(p) for line in group.lines for p in line.points])
    handles = [Line2D([], [], color=colors[label], marker=markers[label], label=label) for label in labels]
    if ideal:
        handles.append(Line2D([], [], color="gray", linestyle="--", label="ideal: N × the line's 1-worker rate"))
    if percent:
        handles.append(Line2D([], [], color="gray", linestyle=":", label="100% = linear scaling"))
    columns = 3 if max(len(h.get_label()) for h in handles) <= 36 else 2  # long labels: fewer, wider columns
    fig.legend(handles=handles, loc="outside lower center", ncols=min(columns, len(handles)), fontsize=8)
    fig.suptitle(title, fontsize=11)
    return fig


def _bar_figure(groups: List[plot_lines.Panel], *, title: str, ylabel: str, y: Callable[[Point], float],
                yerr: Callable[[Point], Tuple[float, float]]) -> Figure:
    """One bar per line (each has a single point), in the lines' colours, for data with nothing to join."""
    labels = list(dict.fromkeys(line.label for g in groups for line in g.lines))
    colors, _ = _styles(labels)
    fig, axes = _grid(groups)
    for group, ax in zip(groups, axes):
        names = [f"{line.label}\n{line.xs[0]} {plot_lines.scale_unit(line.points[0].config, line.xs[0])}"
                 for line in group.lines]
        heights = [y(line.points[0]) for line in group.lines]
        err = np.array([[_zero_if_bad(e) for e in yerr(line.points[0])] for line in group.lines]).T
        ax.bar(range(len(heights)), heights, color=[colors[line.label] for line in group.lines],
               yerr=err if err.any() else None, capsize=4)
        ax.set_xticks(range(len(names)), names, fontsize=8)
        ax.set_title(group.title, fontsize=10)
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    return fig


def _grid(groups: List[plot_lines.Panel]) -> Tuple[Figure, List]:
    """A figure with one row per first panel key (e.g. mode) and one column per second (e.g.
    batch); the axes of each group in order, unused cells hidden."""
    rows = sorted({g.order[0] for g in groups})
    cols = sorted({g.order[1] for g in groups})
    fig, axes = plt.subplots(len(rows), len(cols), squeeze=False, layout="constrained",
                             figsize=(max(4.6 * len(cols), 7.0), 3.6 * len(rows) + 1.2))
    for ax in axes.flat:
        ax.set_visible(False)
    used = [axes[rows.index(g.order[0])][cols.index(g.order[1])] for g in groups]
    for ax in used:
        ax.set_visible(True)
    return fig, used


def _styles(labels: Sequence[str]) -> Tuple[Dict[str, str], Dict[str, str]]:
    """Colour and marker per label: a strategy on its own keeps one colour in every figure and
    report; other labels take the colours left over."""
    index = {label: STRATEGIES.index(label) for label in labels if label in STRATEGIES}
    spare = (i for i in itertools.count() if i % 10 not in index.values() or i >= 10)
    for label in labels:
        if label not in index:
            index[label] = next(spare)
    return ({label: f"C{i % 10}" for label, i in index.items()},
            {label: _MARKERS[i % len(_MARKERS)] for label, i in index.items()})


def _axes(ax, group: plot_lines.Panel, xlabel: str, ylabel: str, percent: bool, ys: List[float]) -> None:
    xs = group.xs
    if len(xs) > 2 and xs[0] > 0 and xs[-1] / xs[0] >= 4:  # sizes that double: evenly spaced on log2
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(xs)
    ax.set_xticklabels([str(v) for v in xs])
    if len(xs) == 1:
        ax.set_xlim(xs[0] - 1, xs[0] + 1)
    if percent:
        ax.axhline(1.0, color="gray", linestyle=":", linewidth=1)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylim(0, max(1.1, ax.get_ylim()[1]))
    elif min(ys) > 0 and max(ys) / min(ys) >= 10:  # lines ten times apart: log, or the low one is flat
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(LogFormatter())
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        ax.set_ylabel(ylabel + " (log scale)")
    else:
        ax.set_ylim(bottom=0)
    ax.set_title(group.title, fontsize=10)
    ax.set_xlabel(xlabel)
    if not ax.get_ylabel():
        ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)


def _workers_axis(points: Sequence[Point]) -> str:
    return "workers (mirrored: local devices)" if _has_mirrored(points) else "workers"


def _has_mirrored(points: Sequence[Point]) -> bool:
    return any(strategy_traits.get(p.config.get("strategy")).local_devices for p in points)


def _repeat_error(p: Point) -> Tuple[float, float]:
    """Distance to the point's 95% interval across repeats; nothing for a single run."""
    if len(p.runs) < 2:
        return 0.0, 0.0
    low, high = p.interval
    return p.rate - low, high - p.rate


def step_error(p: Point) -> Tuple[float, float]:
    ci = (p.stats or {}).get("ci95_s", float("nan"))
    return ci, ci


def save(fig: Optional[Figure], path: str) -> bool:
    if fig is None:
        return False
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


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

