"""Embedding tables in a sweep: for every point of a recommender (tfbench.workloads.recommender),
what a step's ids touch, what those rows should move by the strategy's rule (the records' `sparse`
facts) beside what the busiest host's link carried (emulated hosts), with the step split; and,
per setting, where the parameter server overtakes the all-reduce strategies and where it does not.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Optional, Sequence

from tfbench.config import strategy_traits
from tools.report.aggregate import Point, order_key
from tools.report.split_section import point_split
from tools.report.summary import fmt, table

HEADERS = ["strategy", "workers", "setting", "examples/sec", "unique rows per worker step",
           "rows' bytes per step (rule)", "busiest host's link tx / rx per step", "compute / communication / "
           "waiting ms"]
SETTING_KEYS = ("zipf_alpha", "batch_size", "embedding_rows", "embedding_tables", "link_bandwidth")


def sparse_of(point: Point) -> Optional[Dict]:
    return next(((r.cluster or {}).get("sparse") for r in point.runs if (r.cluster or {}).get("sparse")), None)


def setting(point: Point, keys: Sequence[str]) -> str:
    return ", ".join(f"{k}={point.config.get(k)}" for k in keys) or "–"


def busiest_link(point: Point) -> str:
    """The busiest emulated host's bytes per step (transmitted / received), mean over the runs."""
    traffic = [((r.cluster or {}).get("link_traffic") or {}) for r in point.runs]
    traffic = [t for t in traffic if t]
    if not traffic:
        return "–"
    busiest = [max(t.values(), key=lambda h: h["tx_bytes_per_step"] + h["rx_bytes_per_step"]) for t in traffic]
    tx = sum(h["tx_bytes_per_step"] for h in busiest) / len(busiest)
    rx = sum(h["rx_bytes_per_step"] for h in busiest) / len(busiest)
    return f"{tx / 1e6:.3f} / {rx / 1e6:.3f} MB"


def rule_bytes(sparse: Dict) -> str:
    wire = sparse.get("wire") or {}
    size = wire.get("per_worker_step_bytes", wire.get("per_host_step_bytes"))
    if size is None:
        return "–"
    where = "per worker" if "per_worker_step_bytes" in wire else "per host"
    return f"{size / 1e6:.3f} MB {where} ({wire['rule'].split(':')[0]})"


def crossovers(points: Sequence[Point], keys: Sequence[str]) -> List[str]:
    """Per setting: at which worker counts the parameter server is faster than every all-reduce strategy."""
    by_setting: Dict[str, Dict[int, Dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for p in points:
        traits = strategy_traits.get(p.config.get("strategy"))
        kind = "ps" if traits.ps_tasks else ("all-reduce" if traits.all_reduce else "")
        if kind and p.rate == p.rate:
            best = by_setting[setting(p, keys)][int(p.config.get("num_workers", 1))]
            best[kind] = max(best.get(kind, 0.0), p.rate)
    lines = []
    for where, by_n in sorted(by_setting.items()):
        compared = sorted(n for n, rates in by_n.items() if {"ps", "all-reduce"} <= set(rates))
        if not compared:
            continue
        wins = [n for n in compared if by_n[n]["ps"] > by_n[n]["all-reduce"]]
        ratio = ", ".join(f"{n}: {by_n[n]['ps'] / by_n[n]['all-reduce']:.2f}x" for n in compared)
        if not wins:
            verdict = "the parameter server never overtakes the fastest all-reduce strategy"
        elif wins == compared[compared.index(wins[0]):]:
            verdict = f"crossover at {wins[0]} workers: the parameter server is faster from there on"
        else:
            verdict = f"the parameter server is faster at {', '.join(map(str, wins))} workers only"
        lines.append(f"- {where}: {verdict} (parameter server ÷ fastest all-reduce, by workers: {ratio}).")
    return lines


def section(points: Sequence[Point]) -> List[str]:
    """The summary.md section (empty when no point has embedding tables)."""
    sparse_points = [p for p in points if sparse_of(p)]
    if not sparse_points:
        return []
    keys = [k for k in SETTING_KEYS if len({repr(p.config.get(k)) for p in sparse_points}) > 1]
    rows = []
    for p in sorted(sparse_points, key=lambda p: order_key(p.config)):
        sparse, split = sparse_of(p), point_split(p) or {}
        per_shard = sparse["unique_rows_per_shard"]
        rows.append([p.config.get("strategy"), p.config.get("num_workers"), setting(p, keys), fmt(p.rate, 1),
                     fmt(sum(per_shard) / len(per_shard), 0), rule_bytes(sparse), busiest_link(p),
                     " / ".join(fmt(split.get(part), 1) for part in ("compute", "communication", "waiting"))])
    return (["", "## Embedding tables: where the parameter server earns its place", "",
             "Per point: the distinct rows one worker's step touches (counted from its ids: the model looks up "
             "unique ids), what those rows move per step by the strategy's rule (all-gather: each host receives "
             "the rows of the N - 1 others; parameter server: each worker pulls and pushes its own rows; "
             "docs/definitions.md), what the busiest emulated host's link carried per step (all traffic, dense "
             "layers included), and the step split.", "", table(HEADERS, rows), ""]
            + crossovers(sparse_points, keys))

