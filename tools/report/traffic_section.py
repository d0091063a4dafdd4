"""The report's bytes-per-step table: each emulated host's link traffic per global step in units of
|w|, against docs/definitions.md's law, with local emulated runs and runs on Slurm's emulated nodes side
by side.

|w| is 4 bytes per trainable parameter (tfbench.measure.flops counts them). The hosts come from
the run itself: a local emulated run's plan.json gives each task's address and network.json the
host at that address; a run on Slurm nodes names each task's node in its cluster record
(slurm_task_nodes, from SLURMD_NODENAME). The reference per global step with N workers: the one
ps host moves N·|w| each way and every worker host |w|; ring all-reduce moves 2(N−1)/N·|w| per
host each way. A host holding only the coordinator is left out; a collocated ps's host is both.
A run with embedding tables (its cluster record's `sparse`) is left to the report's tables section:
its tables move the rows a step touches, not |w|.
"""
from __future__ import annotations

import json
import os
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

from tfbench.config import strategy_traits
from tfbench.config.kinds import kind_of
from tools.report.aggregate import Point
from tools.report.summary import fmt, table
from tools.rundirs.runs import Run

W = r"\|w\|"  # |w| inside a markdown table cell
HEADERS = ["strategy", "workers", "hosts", f"reference ({W})", f"local emulated tx / rx ({W})",
           f"Slurm nodes tx / rx ({W})"]


def w_bytes(config: Dict) -> Optional[float]:
    """|w| in bytes: 4 per trainable parameter of the run's model (fp32 variables)."""
    from tfbench.config import RunConfig
    from tfbench.measure import flops

    try:
        counts = flops.per_example(RunConfig.from_dict(config))
    except Exception:  # noqa: BLE001 - a model that cannot be counted costs its rows, not the report
        return None
    return 4.0 * counts["params"]


def tasks_by_host(run: Run) -> Dict[str, List[str]]:
    """{host (h0, h1, ...): [tasks on it]} of an emulated run, local or on Slurm's nodes."""
    out: Dict[str, List[str]] = defaultdict(list)
    nodes = (run.cluster or {}).get("slurm_task_nodes")
    if nodes:
        for task, node in nodes.items():
            out[node].append(task)
        return dict(out)
    try:
        with open(os.path.join(run.path, "plan.json"), encoding="utf-8") as f:
            plan = json.load(f)
        with open(os.path.join(run.path, "network.json"), encoding="utf-8") as f:
            names = {h["address"]: h["name"] for h in json.load(f)["hosts"]}
    except (OSError, ValueError, KeyError):
        return {}
    for t in plan.get("tasks", []):
        out[names.get(t["host"], t["host"])].append(f"{t['role']}_{t['index']}")
    return dict(out)


def host_groups(strategy: str, hosts: Dict[str, List[str]]) -> List[Tuple[str, List[str]]]:
    """[(label, hosts)]: the ps host(s) and the worker hosts, or every ring host."""
    workers = sorted(h for h, tasks in hosts.items() if any(t.startswith("worker_") for t in tasks))
    if not strategy_traits.get(strategy).ps_tasks:
        return [("each host (mean)", workers)]
    ps = sorted(h for h, tasks in hosts.items() if any(t.startswith("ps_") for t in tasks))
    return [("ps host", ps), ("each worker host (mean)", [h for h in workers if h not in ps])]


def reference(strategy: str, label: str, n: int) -> str:
    if strategy_traits.get(strategy).all_reduce:
        return f"2(N−1)/N = {2 * (n - 1) / n:.2f}"
    return f"N = {n}" if label == "ps host" else "1"


def measured(run: Run, hosts: List[str], w: float) -> Optional[Tuple[float, float]]:
    traffic = (run.cluster or {}).get("link_traffic") or {}
    found = [traffic[h] for h in hosts if h in traffic]
    if not found:
        return None
    return (sum(t["tx_bytes_per_step"] for t in found) / len(found) / w,
            sum(t["rx_bytes_per_step"] for t in found) / len(found) / w)


def label(config: Dict) -> str:
    if strategy_traits.get(config.get("strategy")).ps_tasks:
        return f"{config.get('strategy')} ({config.get('ps_placement', 'collocated')} ps)"
    return str(config.get("strategy"))


def section(points: Sequence[Point]) -> List[str]:
    """The table (or nothing when no point ran on emulated hosts with link counters)."""
    cells: Dict[Tuple, Dict[str, str]] = defaultdict(dict)
    sizes: Dict[str, float] = {}
    for p in points:
        ok = [r for r in p.runs if r.ok and (r.cluster or {}).get("link_traffic")]
        if not kind_of(p.config).emulated_hosts or not ok or ok[0].cluster.get("sparse"):
            continue  # embedding tables move the rows a step touches, by their own rule (the tables' section)
        run = ok[0]
        w = w_bytes(run.config)
        if not w:
            continue
        strategy, n = p.config["strategy"], int(p.config["num_workers"])
        sizes[f"{run.config['model']} {run.config['num_classes']} classes"] = w
        where = kind_of(p.config).engine  # who started the tasks: tfbench's launcher, or Slurm
        for order, (name, hosts) in enumerate(host_groups(strategy, tasks_by_host(run))):
            values = [measured(r, hosts, w) for r in ok]
            values = [v for v in values if v]
            if values:
                tx, rx = (sum(v[i] for v in values) / len(values) for i in (0, 1))
                key = (label(p.config), p.config.get("link_bandwidth") or "unshaped", n, order, name, strategy)
                cells[key][where] = f"{fmt(tx, 2)} / {fmt(rx, 2)}"
    if not cells:
        return []
    rows = [[f"{k[0]}, {k[1]}", k[2], k[4], reference(k[5], k[4], k[2]), v.get("tfbench", "–"), v.get("slurm", "–")]
            for k, v in sorted(cells.items())]
    size = "; ".join(f"{name}: |w| = {w / 1e6:.2f} MB" for name, w in sorted(sizes.items()))
    return ["", "## Bytes per global step on each host's link", "",
            f"Counters of each host's link over the measured window, per global step, in units of |w| ({size}). "
            "Reference: one ps host moves N·|w| each way and each worker host |w|; ring all-reduce "
            "2(N−1)/N·|w| per host. Local emulated hosts and Slurm's emulated nodes side by side (mean of the "
            "hosts in the row, and of repeats).", "", table(HEADERS, rows)]
