"""python -m tools.report <run dir or sweep dir> [--out DIR]

Finds every run directory below the given one and writes, into --out (default <dir>/report/):
results.csv (one row per cluster and task record), summary.md (results, hard-vs-soft and
CPU-vs-GPU comparisons when the data holds both, failed runs) and PNG plots. The markdown is also
printed. Exit code 0 on success, 1 when there is nothing to report, 2 when the directory is missing.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import List, Optional, Sequence

from absl import app, flags

from tfbench.config import helptext
from tfbench.config.choices import EMULATED_COMPUTE, REAL_COMPUTE
from tools.report import (
    aggregate,
    convergence_section,
    network_plots,
    plots,
    recovery_section,
    results_csv,
    sparse_section,
    split_section,
    summary,
    traffic_section,
)
from tools.rundirs.runs import Run, find_runs, read_monitor
from tools.rundirs.sweep_state import FAILED, find_sweep

FLAGS = flags.FLAGS
# (title, column, a, b, the keys that follow from the column's value)
COMPARISONS = (("Hard vs soft placement", "placement", "soft", "hard", ()), ("CPU vs GPU", "device", "cpu", "gpu", ()),
               ("Emulated vs real compute", "compute", REAL_COMPUTE, EMULATED_COMPUTE, ("compute_ms",)))
POINT_PLOTS = (("throughput vs workers", "throughput_vs_workers.png", plots.throughput_vs_workers),
               ("seconds per batch vs batch size", "seconds_per_batch.png", plots.seconds_per_batch),
               ("scaling efficiency vs workers", "scaling_efficiency.png", plots.scaling_efficiency),
               ("seconds per batch vs workers, per link", "seconds_per_batch_per_link.png",
                network_plots.seconds_per_batch_vs_workers))


@dataclasses.dataclass(frozen=True)
class Report:
    out: str
    markdown: str
    runs: List[Run]
    points: List[aggregate.Point]
    failures: List[summary.Failure]


def build(root: str, out: Optional[str] = None) -> Report:
    """Writes results.csv, summary.md and the plots for every run below `root`."""
    root = os.path.abspath(root)
    out = os.path.abspath(out or os.path.join(root, "report"))
    os.makedirs(out, exist_ok=True)
    runs = find_runs(root)
    points = aggregate.combine(runs)
    results_csv.write(os.path.join(out, "results.csv"),
                      results_csv.rows(runs, aggregate.run_efficiency(points), root))
    failures = retried(failed_runs(runs) + failed_sweep_points(root), points)
    comparisons = [(title, aggregate.compare(points, column, a, b, settled))
                   for title, column, a, b, settled in COMPARISONS]
    written = _plots(runs, points, out) + convergence_section.plots(points, out)
    if split_section.plot(points, os.path.join(out, "step_split.png")):
        written.append(("where each global step's time goes", "step_split.png"))
    title = os.path.basename(root)
    sweep = find_sweep(root)
    notes = (sweep.read_spec() or {}).get("notes", []) if sweep else []
    markdown = summary.render(title, points, failures, comparisons, written, num_runs=len(runs), notes=notes,
                              sections=(split_section.section(points) + sparse_section.section(points)
                                        + traffic_section.section(points)
                                        + convergence_section.section(points) + recovery_section.section(points)))
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(markdown)
    return Report(out=out, markdown=markdown, runs=runs, points=points, failures=failures)


def failed_runs(runs: Sequence[Run]) -> List[summary.Failure]:
    return [summary.Failure(r.run_id, r.config, r.failed_task, r.reason) for r in runs if not r.ok]


def retried(failures: Sequence[summary.Failure], points: Sequence[aggregate.Point]) -> List[summary.Failure]:
    """Failures whose configuration also has an ok run (a sweep re-run fills failed points)
    are marked, so that a report of all-ok points does not read as a failed sweep."""
    ok = {p.key for p in points}
    return [dataclasses.replace(f, retried_ok=aggregate.point_key(f.config) in ok) if f.config else f
            for f in failures]


def failed_sweep_points(root: str) -> List[summary.Failure]:
    """Sweep attempts that failed before their run directory had any results (e.g. bad flags)."""
    sweep = find_sweep(root)
    if sweep is None:
        return []
    failures = []
    for attempt in sweep.attempts():
        run_dir = os.path.join(sweep.runs_dir, attempt.get("run_id", ""))
        if attempt.get("status") == FAILED and not os.path.exists(os.path.join(run_dir, "results.jsonl")):
            failures.append(summary.Failure(attempt.get("run_id", attempt["point_id"]), attempt.get("values", {}),
                                            "", attempt.get("reason", "")))
    return failures


def _plots(runs: Sequence[Run], points: Sequence[aggregate.Point], out: str):
    """(title, path relative to out) of every plot written."""
    written = []
    for title, name, draw in POINT_PLOTS:
        if draw(points, os.path.join(out, name)):
            written.append((title, name))
    used = set()
    for run in runs:
        if run.monitor_path is None:
            continue
        name = run.run_id
        while name in used:
            name += "_"
        used.add(name)
        rel = os.path.join("resources", f"{name}.png")
        os.makedirs(os.path.join(out, "resources"), exist_ok=True)
        if plots.resources(run, read_monitor(run.monitor_path), os.path.join(out, rel)):
            written.append((f"resources of {run.run_id}", rel))
        rel = os.path.join("resources", f"{name}.host_tx.png")
        if network_plots.host_tx(run, os.path.join(out, rel)):
            written.append((f"per-host tx of {run.run_id}", rel))
    return written


def define_flags() -> None:
    if "out" not in FLAGS:
        flags.DEFINE_string("out", "", "Directory for results.csv, summary.md and plots; default <dir>/report.")


def main(argv) -> int:
    if len(argv) != 2:
        print("usage: python -m tools.report <run dir or sweep dir> [--out DIR]", file=sys.stderr)
        return 2
    root = argv[1]
    if not os.path.isdir(root):
        print(f"{root}: no such directory", file=sys.stderr)
        return 2
    report = build(root, FLAGS.out or None)
    if not report.runs and not report.failures:
        print(f"{root}: no run directory (one holding results.jsonl) below it", file=sys.stderr)
        return 1
    print(report.markdown)
    print(f"report written to {report.out}")
    return 0


def run() -> None:
    """`python -m tools.report` (tools/report/__main__.py)."""
    app.run(main, flags_parser=helptext.parser(__doc__, lambda: [("Report", ["out"])], "tools.report", define_flags))
