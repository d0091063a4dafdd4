"""Where each global step's time goes, per sweep point: the step split of every run
(tfbench.measure.breakdown) averaged over its repeats, as a section of summary.md and as a
stacked-bar plot."""
from __future__ import annotations

import os
from typing import List, Optional, Sequence

from tfbench.config import strategy_traits
from tfbench.measure.breakdown import PARTS
from tools.report.aggregate import Point, order_key
from tools.report.summary import fmt, knobs_cell, table

COLUMNS = ("strategy", "num_workers", "num_ps", "ps_placement", "ps_sync", "batch_size", "link_bandwidth")


def point_split(point: Point) -> Optional[dict]:
    """Mean ms of each part over the point's runs that have a split (None: none has)."""
    splits = [(r.cluster or {}).get("step_breakdown") or {} for r in point.runs]
    splits = [s for s in splits if "mean_s" in s]
    if not splits:
        return None
    mean = {p: 1e3 * sum(s["mean_s"].get(p, 0.0) for s in splits) / len(splits) for p in PARTS}
    mean["step"] = 1e3 * sum(s["step_mean_s"] for s in splits) / len(splits)
    mean["source"] = splits[0].get("source", "")
    comms = [(r.cluster or {}).get("communication") or {} for r in point.runs]
    comms = [c for c in comms if c.get("algbw_gbit_s")]
    if comms:  # messages per step, and the bandwidth they achieved (busbw for all-reduce, else algbw)
        mean["messages"] = comms[0]["messages_per_step"]
        key = "busbw_gbit_s" if "busbw_gbit_s" in comms[0] else "algbw_gbit_s"
        mean["bandwidth"] = f"{sum(c[key] for c in comms) / len(comms):.2f} ({key.split('_')[0]})"
    return mean


def section(points: Sequence[Point]) -> List[str]:
    """The summary.md section (empty when no run has a split)."""
    rows = []
    shown = [c for c in COLUMNS if len({repr(p.config.get(c)) for p in points}) > 1 or c in ("strategy",
                                                                                              "num_workers")]
    with_knobs = any(knobs_cell(p.config) != "default" for p in points)
    for p in sorted(points, key=lambda p: order_key(p.config)):
        split = point_split(p)
        if split is None:
            continue
        step = split["step"] or float("nan")
        rows.append([p.config.get(c) for c in shown] + ([knobs_cell(p.config)] if with_knobs else []) +
                    [f"{fmt(split[part], 1)} ({split[part] / step:.0%})" for part in PARTS] +
                    [fmt(split["step"], 1), split.get("messages", "–"), split.get("bandwidth", "–"), split["source"]])
    if not rows:
        return []
    headers = (shown + (["knobs"] if with_knobs else []) + [f"{part} ms" for part in PARTS] +
               ["global step ms", "messages/step", "Gbit/s", "from"])
    return ["", "## Where each global step's time goes", "",
            "Mean per global step over the measured window (share of the step). Synchronous strategies: each "
            "rank stamps the moment its batch is in hand and the moment its gradients exist; input is the mean "
            "wait for the batch, compute the mean from the batch to the gradients, waiting the start skew and "
            "slower ranks, communication the rest (all-reduce and update). Parameter servers: input measured in "
            "each closure, pull measured alone after the window, push measured, compute derived, waiting the "
            "remainder. Every run record says how each part was obtained (`step_breakdown.methods`). "
            "Messages/step: all-reduces (MWMS: TensorFlow's packs; Horovod: fusion buffers, at least) or a "
            "worker's pulls and pushes; Gbit/s: what they achieved over the communication time (busbw = "
            "algbw x 2(N-1)/N for all-reduce, as nccl-tests).", "",
            table(headers, rows)]


def plot(points: Sequence[Point], path: str) -> bool:
    """100% stacked bars: each part's share of the global step, one bar per point with a split,
    its step in ms above it (points' steps differ by orders of magnitude)."""
    rows = [(p, point_split(p)) for p in sorted(points, key=lambda p: order_key(p.config))]
    rows = [(p, s) for p, s in rows if s is not None and s["step"] > 0]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rows) + 2), 4.5))
    bottom = [0.0] * len(rows)
    for part in PARTS:
        values = [100.0 * s[part] / s["step"] for _, s in rows]
        ax.bar(range(len(rows)), values, bottom=bottom, label=part)
        bottom = [b + v for b, v in zip(bottom, values)]
    for i, (_, s) in enumerate(rows):
        ax.text(i, min(bottom[i], 100.0) + 1.5, f"{s['step']:.3g} ms", ha="center", fontsize=7)
    ax.set_xticks(range(len(rows)), [_label(p.config) for p, _ in rows], fontsize=7)
    ax.set_ylim(0, 125)
    ax.set_ylabel("% of the global step")
    ax.set_title("where each global step's time goes (mean step above each bar)")
    ax.legend(fontsize=8, loc="upper center", ncol=len(PARTS), frameon=False)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _label(config: dict) -> str:
    name = config.get("strategy", "")
    if strategy_traits.get(name).coordinated:
        name = f"PS {'sync' if config.get('ps_sync') else 'async'}"
    link = config.get("link_bandwidth") or ""
    latency = f" +{config['link_latency']:g}ms" if config.get("link_latency") else ""
    return f"{name}\n{config.get('num_workers')}w {link}{latency}".rstrip()
