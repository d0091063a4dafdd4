"""Plots of emulated-network runs, as the studies drew them: seconds per batch against workers
for each link, and each host's tx over time against the link's rate (a parameter server's link
that stays flat at the rate is saturated)."""
from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from typing import Dict, List, Optional, Sequence

from tfbench.config.kinds import kind_of
from tools.report import plot_lines, plots, traffic_section
from tools.report.aggregate import Point
from tools.rundirs.runs import Run

plt = plots.plt
LINKS_FILE = "links.jsonl"


def seconds_per_batch_vs_workers(points: Sequence[Point], path: str) -> bool:
    """Mean global step time against workers, a panel per mode and link, one line per strategy
    (and ps placement, where it differs)."""
    points = [p for p in points if kind_of(p.config).emulated_hosts
              and math.isfinite((p.stats or {}).get("mean_s", float("nan")))]
    groups = plot_lines.panels(points, x=plot_lines.SCALE, panel_keys=("mode", "link_bandwidth"), primary="strategy")
    figure = plots.line_figure(groups, title="Seconds per batch vs workers, per link (error bars: step-time 95% CI)",
                           xlabel="workers", ylabel="seconds per batch (mean global step)",
                           y=lambda p: p.stats["mean_s"], yerr=plots.step_error)
    return plots.save(figure, path)


def read_links(run: Run) -> Dict[str, List[dict]]:
    by_host: Dict[str, List[dict]] = defaultdict(list)
    path = os.path.join(run.path, LINKS_FILE)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            by_host[rec["host"]].append(rec)
    return {h: sorted(v, key=lambda r: r["time"]) for h, v in by_host.items()}


def host_tx(run: Run, path: str) -> bool:
    """Each host's tx (Mbit/s) over the run, the configured link rate dashed, the measured
    window shaded; hosts are labelled with the tasks they hold."""
    links = read_links(run)
    if not links:
        return False
    t0 = min(recs[0]["time"] for recs in links.values())
    fig, ax = plt.subplots(figsize=(8, 4))
    roles = traffic_section.tasks_by_host(run)
    for host, recs in sorted(links.items()):
        ax.plot([r["time"] - t0 for r in recs], [r["tx_kbps"] / 1000 for r in recs],
                label=f"{host} ({', '.join(sorted(roles.get(host, [])))})")
    rate = _configured_mbit(run)
    if rate:
        ax.axhline(rate, color="gray", linestyle="--", linewidth=1, label=f"link rate {rate:g} Mbit/s")
    window = _window(run)
    if window:
        ax.axvspan(window[0] - t0, window[1] - t0, color="gray", alpha=0.15, label="measured window")
    ax.set_xlabel("seconds since the monitor started")
    ax.set_ylabel("tx (Mbit/s)")
    ax.set_title(f"Per-host tx: {run.run_id}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _configured_mbit(run: Run) -> Optional[float]:
    try:
        with open(os.path.join(run.path, "network.json"), encoding="utf-8") as f:
            network = json.load(f)
    except (OSError, ValueError):
        return None
    return network["rate_bps"] / 1e6 if network.get("shaped") else None


def _window(run: Run):
    record = run.cluster or {}
    if record.get("window_start") is None:
        return None
    return record["window_start"], record["window_end"]
