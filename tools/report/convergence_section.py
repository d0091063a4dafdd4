"""The report's section on what asynchrony costs: per point, updates, staleness, idleness, held-out
accuracy and time to the target accuracy, and plots of accuracy against training time and against
updates (one panel per worker count and straggler, one line per way of training).

It reads the fields the cluster record lifts from the tasks (tfbench.results.records.training_dynamics)
and appears only when some point has them (parameter-server runs, or runs on real data).
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from tfbench.config import strategy_traits  # noqa: E402
from tools.report.aggregate import Point, order_key  # noqa: E402
from tools.report.summary import fmt, table  # noqa: E402


def way(config: Dict) -> str:
    """How a point trains: the parameter-server mode (with its bound), or the strategy."""
    traits = strategy_traits.get(config.get("strategy"))
    if traits.coordinated:
        if config.get("ps_sync"):
            return f"{traits.label} sync"
        bound = config.get("ps_staleness_bound", -1)
        return f"{traits.label} bounded s={bound}" if bound is not None and bound >= 0 else f"{traits.label} async"
    if traits.elastic and config.get("horovod_elastic"):
        return f"{traits.label} elastic"
    return traits.label


def _mean(values) -> Optional[float]:
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.fmean(values) if values else None


def _dynamics(point: Point, key: str) -> List:
    return [(r.cluster or {}).get(key) for r in point.runs]


def row(point: Point) -> List:
    """One table row: means over the point's repeats."""
    conv = [c or {} for c in _dynamics(point, "convergence")]
    stale = [s or {} for s in _dynamics(point, "staleness")]
    clock = [s or {} for s in _dynamics(point, "clock_staleness")]
    idle = [_mean((i or {}).values()) for i in _dynamics(point, "idleness")]
    reached = [c for c in conv if c.get("reached")]
    target = next((c.get("target_accuracy") for c in conv if c.get("target_accuracy")), None)
    return [way(point.config), point.config.get("num_workers"), point.config.get("straggler") or "-",
            fmt(point.rate, 0), fmt(_mean(_dynamics(point, "updates")), 0),
            fmt(_mean(_dynamics(point, "updates_per_sec")), 1),
            fmt(_mean(s.get("max") for s in stale), 1), fmt(_mean(s.get("mean") for s in stale), 2),
            fmt(_mean(s.get("max") for s in clock), 1), fmt(_mean(idle), 2),
            fmt(_mean(c.get("final_accuracy") for c in conv), 3),
            f"{fmt(_mean(c['time_to_accuracy_s'] for c in reached), 1)} ({len(reached)}/{len(conv)})" if target else "-",
            fmt(_mean(c["updates_to_accuracy"] for c in reached), 0) if target else "-"]


HEADERS = ["training", "workers", "straggler", "images/sec", "updates", "updates/s", "staleness max",
           "staleness mean", "clock staleness max", "idleness", "final accuracy", "time to target s (reached)",
           "updates to target"]


def relevant(points: Sequence[Point]) -> List[Point]:
    return [p for p in points if any((r.cluster or {}).get(k) for r in p.runs
                                     for k in ("convergence", "staleness"))]


def section(points: Sequence[Point]) -> List[str]:
    """Markdown lines: the table, with the definitions the numbers follow."""
    points = relevant(points)
    if not points:
        return []
    targets = {c.get("target_accuracy") for p in points for c in _dynamics(p, "convergence") if c}
    lines = ["", "## Synchronous vs asynchronous training", "",
             "Staleness: updates the ps applied between a worker's read and its own update (version counter "
             "on the ps). Clock staleness: another worker's updates, among its first c, missing from the "
             "weights read by an update made after c earlier updates of its worker (stale-synchronous bound: at most s). Idleness: share of the "
             "measured window a worker ran no closure of its own (mean over workers). Time to target: seconds "
             "of training from the measured window's start to the first held-out evaluation at or above "
             f"{', '.join(fmt(t, 2) for t in sorted(t for t in targets if t)) or 'the target'}.", "",
             table(HEADERS, [row(p) for p in sorted(points, key=lambda p: order_key(p.config))])]
    return lines


def _curves(points: Sequence[Point], x_key: str) -> Dict[Tuple, Dict[str, List[Tuple[float, float]]]]:
    """{(straggler, workers): {way: [(x, accuracy)...]}} of the first run of each point."""
    panels: Dict[Tuple, Dict[str, List]] = defaultdict(dict)
    for p in points:
        conv = next((c for c in _dynamics(p, "convergence") if c and c.get("points")), None)
        if conv:
            key = (p.config.get("straggler") or "", p.config.get("num_workers"))
            panels[key][way(p.config)] = [(q[x_key], q["accuracy"]) for q in conv["points"]]
    return panels


def accuracy_figure(points: Sequence[Point], x_key: str, xlabel: str):
    panels = _curves(points, x_key)
    if not panels:
        return None
    keys = sorted(panels, key=lambda k: (k[0], k[1] or 0))
    cols = min(3, len(keys))
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False, sharey=True)
    colours = {w: f"C{i}" for i, w in enumerate(sorted({w for k in keys for w in panels[k]}))}
    for ax, key in zip(axes.flat, keys):
        for name, curve in sorted(panels[key].items()):
            ax.plot([x for x, _ in curve], [y for _, y in curve], marker="o", markersize=3, label=name,
                    color=colours[name])
        ax.set_title(f"{key[1]} worker(s)" + (f", straggler {key[0]}" if key[0] else ""), fontsize=9)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(keys):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("held-out accuracy")
    handles = [plt.Line2D([], [], color=c, marker="o", label=n) for n, c in colours.items()]
    fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def plots(points: Sequence[Point], out: str) -> List[Tuple[str, str]]:
    """(title, file) of the accuracy plots written into `out`."""
    import os

    written = []
    for x_key, xlabel, name in (("train_s", "training time (s)", "accuracy_vs_time.png"),
                                ("updates", "updates applied", "accuracy_vs_updates.png")):
        fig = accuracy_figure(relevant(points), x_key, xlabel)
        if fig is None:
            continue
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)
        written.append((f"held-out accuracy vs {xlabel}", name))
    return written
