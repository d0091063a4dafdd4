"""The report's recovery table: for every run with an injected fault (--fault) that the run
recovered from, how long the task took to serve and to update again and the cluster's
examples/sec before the fault, while the task was down and after (cluster.faults.recovery)."""
from __future__ import annotations

from typing import List, Sequence

from tools.report.aggregate import Point
from tools.report.convergence_section import way
from tools.report.summary import fmt, table

HEADERS = ["run", "training", "workers", "fault", "others went on s", "ready again s",
           "first update s (restart: measuring again)", "no step ran s", "examples/sec before",
           "while down", "after", "results lost", "updates without result"]


def section(points: Sequence[Point]) -> List[str]:
    rows = []
    for p in points:
        for run in p.runs:
            cluster = run.cluster or {}
            faults = {f["task"]: f for f in cluster.get("faults") or []}
            for entry in cluster.get("recovery") or []:
                fault = faults.get(entry["task"], {})
                rows.append([run.run_id, way(p.config), p.config.get("num_workers"),
                             f"{entry['task']} {entry['kind']} after step {fault.get('applied_at_measured_step', '?')}",
                             fmt(entry.get("time_to_continue_s"), 1), fmt(entry.get("time_to_ready_s"), 1),
                             fmt(entry.get("time_to_first_update_s", entry.get("time_to_resume_s")), 1),
                             fmt(entry.get("time_without_steps_s"), 1),
                             fmt(entry.get("examples_per_sec_before"), 0), fmt(entry.get("examples_per_sec_during"), 0),
                             fmt(entry.get("examples_per_sec_after"), 0), entry.get("closure_results_lost", "–"),
                             entry.get("updates_without_result", "–")])
    if not rows:
        return []
    return ["", "## Recovery from injected faults", "",
            "Images/sec per phase from the workers' own update end times: window start to the fault, the fault "
            "to the task serving again, then to the window's end (Horovod elastic: to the first global step with "
            "every rank again). \"Others went on\" and \"no step ran\" apply to Horovod elastic, where the other "
            "ranks continue without the killed one.", "", table(HEADERS, rows)]
