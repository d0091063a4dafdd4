"""python -m tools.report.latency DIR: worker idleness and images/sec against link latency
(`make latency`), and whether the studies' direction holds.

Jia et al. measured, for parameter servers, that workers sit idle more as the network's latency
grows (10 -> 200 ms: ~10% -> ~72%) and less with more parameter servers per worker and with
larger batches. Here, per series (sync or async, ps:workers, batch): one point per latency.

Idleness of a worker: the share of the global step in which it does not compute, 1 - c / step,
c the compute per step of its series' lowest-latency run in the runs' step splits
(tfbench.measure.breakdown; see NOTE); the idleness from each run's own recorded compute and the record's own `idleness`
(share of the window with no closure running on the worker) are shown beside it. Writes DIR/latency/
summary.md, idleness_vs_latency.png and images_per_sec_vs_latency.png, and prints the table.
"""
from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

from tfbench.config import helptext, strategy_traits
from tools.rundirs.runs import Run, find_runs

NOTE = ("Idleness is the share of a worker's global step not spent on the forward and backward pass of its "
        "batch: 1 - c / step, c the compute per step of the series' lowest-latency run (normally 0 ms). The pass "
        "takes as long at any latency, but the step split's compute is a closure's time less a pull measured "
        "apart, and the error of that difference grows with the pull's round trips: reads overlapped inside the "
        "step count as compute, and a probe slower than the step's own reads leaves none. The idleness from each "
        "run's own recorded compute and the share of time with no closure running on the worker are shown "
        "beside it.")
FLAT = 0.02  # a change of idleness smaller than this (2 percentage points) is within run-to-run noise
Series = Tuple[bool, int, int, int]  # (sync, num_ps, num_workers, batch)


def series_of(run: Run) -> Series:
    c = run.config
    return bool(c.get("ps_sync")), int(c.get("num_ps") or 1), int(c["num_workers"]), int(c["batch_size"])


def label(s: Series) -> str:
    sync, k, n, batch = s
    return f"{'sync' if sync else 'async'} PS {k}:{n} (ps:workers), batch {batch}"


def compute_and_step(run: Run) -> Optional[Tuple[float, float]]:
    """(compute s, step s) per global step from the run's step split, None without one."""
    split = (run.cluster or {}).get("step_breakdown") or {}
    if "mean_s" not in split or not split.get("step_mean_s"):
        return None
    return split["mean_s"]["compute"], split["step_mean_s"]


def idleness_of(by_series: Dict[Series, List[Tuple[float, Run]]]) -> Dict[str, float]:
    """{run path: 1 - c / step}, c the compute per step of the series' lowest-latency run whose
    split reads any (see NOTE: its pull is the shortest, so its compute the least wrong)."""
    out = {}
    for pts in by_series.values():
        found = {path: cs for path, cs in ((r.path, compute_and_step(r)) for _, r in pts) if cs}
        base = next((c for c, _ in found.values() if c > 0), None)  # pts run by latency
        if base is not None:
            out.update({path: max(0.0, 1.0 - base / step) for path, (_, step) in found.items()})
    return out


def compute_idleness(run: Run) -> Optional[float]:
    """1 - compute / step of one run from its own split (compute including the in-step reads)."""
    found = compute_and_step(run)
    return None if found is None else max(0.0, 1.0 - found[0] / found[1])


def closure_idleness(run: Run) -> Optional[float]:
    idle = (run.cluster or {}).get("idleness") or {}
    return statistics.fmean(idle.values()) if idle else None


def points(runs: Sequence[Run]) -> Dict[Series, List[Tuple[float, Run]]]:
    """Series -> [(latency ms, run)] of the runs that finished, by latency."""
    out: Dict[Series, List[Tuple[float, Run]]] = defaultdict(list)
    for run in runs:
        if run.ok and strategy_traits.get(run.config.get("strategy")).ps_tasks:
            out[series_of(run)].append((float(run.config.get("link_latency") or 0.0), run))
    return {s: sorted(v, key=lambda p: p[0]) for s, v in sorted(out.items())}


def direction(by_series: Dict[Series, List[Tuple[float, Run]]]) -> List[str]:
    """Whether each of the studies' three observations holds in these runs, with the numbers."""
    lines = []
    rising = []
    idleness = idleness_of(by_series)
    for s, pts in by_series.items():
        idle = [(lat, idleness[r.path]) for lat, r in pts if r.path in idleness]
        if len(idle) >= 2:
            rising.append((s, idle[0], idle[-1]))
    if rising:
        ok = [s for s, (l0, i0), (l1, i1) in rising if i1 > i0 + FLAT]
        detail = "; ".join(f"{label(s)}: {i0:.1%} at {l0:g} ms -> {i1:.1%} at {l1:g} ms" for s, (l0, i0), (l1, i1) in rising)
        verdict = "holds" if len(ok) == len(rising) else ("holds mostly" if len(ok) > len(rising) / 2 else "does not hold")
        lines.append(f"- Idleness rises with latency (by more than {FLAT * 100:g} percentage points): {verdict}; "
                     f"it rises in {len(ok)} of {len(rising)} series ({detail}).")
    lines += _compare(by_series, idleness, lambda s: (s[0], s[2], s[3]), lambda s: s[1] / s[2],
                      "more parameter servers per worker")
    lines += _compare(by_series, idleness, lambda s: (s[0], s[1], s[2]), lambda s: s[3], "a larger batch")
    return lines


def _compare(by_series, idleness: Dict[str, float], group_key, order, what: str) -> List[str]:
    """Within series that differ only by `order`, is idleness lower where `order` is larger, at
    each latency both measured?"""
    groups = defaultdict(list)
    for s in by_series:
        groups[group_key(s)].append(s)
    wins, total, examples = 0, 0, []
    for members in groups.values():
        if len(members) < 2:
            continue
        low, high = min(members, key=order), max(members, key=order)
        lows = {lat: idleness.get(r.path) for lat, r in by_series[low]}
        for lat, r in by_series[high]:
            a, b = lows.get(lat), idleness.get(r.path)
            if a is None or b is None:
                continue
            total += 1
            wins += b < a - FLAT
            examples.append(f"{label(high)} at {lat:g} ms: {a:.1%} -> {b:.1%}")
    if not total:
        return []
    verdict = "holds" if wins == total else ("holds mostly" if wins > total / 2 else "does not hold")
    return [f"- Idleness falls with {what} (by more than {FLAT * 100:g} percentage points): {verdict}; "
            f"it is lower at {wins} of {total} latencies ({'; '.join(examples)})."]


def unit_of(by_series) -> str:
    """The unit the runs' rates count (images for image workloads)."""
    return next((r.unit for pts in by_series.values() for _, r in pts), "images")


def table(by_series) -> str:
    head = (f"| series | latency ms | measured RTT ms | {unit_of(by_series)}/sec | idleness (1 - compute at the lowest "
            "latency / step) | idleness (1 - recorded compute / step) | no closure running | step split ms (compute + "
            "communication + waiting, as recorded) |")
    lines, idleness = [head, "|" + "---|" * 8], idleness_of(by_series)
    for s, pts in by_series.items():
        for lat, r in pts:
            split = ((r.cluster or {}).get("step_breakdown") or {}).get("mean_s") or {}
            rtt = ((r.cluster or {}).get("link") or {}).get("rtt_ms")
            idle, ci, wi = idleness.get(r.path), compute_idleness(r), closure_idleness(r)
            parts = " + ".join(f"{split.get(p, 0) * 1e3:.0f}" for p in ("compute", "communication", "waiting"))
            lines.append(f"| {label(s)} | {lat:g} | {rtt if rtt is not None else '-'} | {r.rate:.1f} | "
                         f"{'-' if idle is None else f'{idle:.1%}'} | {'-' if ci is None else f'{ci:.0%}'} | "
                         f"{'-' if wi is None else f'{wi:.0%}'} | {parts} |")
    return "\n".join(lines)


def plot(by_series, y, ylabel: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s, pts in by_series.items():
        xs = [lat for lat, r in pts if y(r) is not None]
        ax.plot(xs, [y(r) for lat, r in pts if y(r) is not None], marker="o", linestyle="--" if s[0] else "-",
                label=label(s))
    ax.set_xlabel("one-way link latency (ms)")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: List[str]) -> int:
    if len(argv) == 2 and argv[1] in helptext.ANY_HELP:
        print(__doc__.strip())
        return 0
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("tfbench: error: give the directory of a latency sweep: python -m tools.report.latency DIR",
              file=sys.stderr)
        return 2
    by_series = points(find_runs(argv[1]))
    if not by_series:
        print(f"tfbench: error: no finished parameter-server run below {argv[1]}", file=sys.stderr)
        return 2
    out = os.path.join(argv[1], "latency")
    os.makedirs(out, exist_ok=True)
    idleness = idleness_of(by_series)
    plot(by_series, lambda r: idleness.get(r.path), "worker idleness (1 - compute of a batch / step)",
         os.path.join(out, "idleness_vs_latency.png"))
    unit = unit_of(by_series)
    plot(by_series, lambda r: r.rate, f"{unit}/sec", os.path.join(out, f"{unit}_per_sec_vs_latency.png"))
    text = "\n".join([f"# Worker idleness and {unit}/sec against link latency", "", NOTE, "", table(by_series), "",
                      "## The studies' direction", ""] + direction(by_series) +
                     ["", "![idleness vs latency](idleness_vs_latency.png)",
                      f"![{unit}/sec vs latency]({unit}_per_sec_vs_latency.png)", ""])
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    print(f"report written to {out}/summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
