"""What a run did about its injected faults (--fault), read off the workers' own step times.

For each killed task that was restarted (a parameter-server worker): the time until it reported
ready again and until it finished an update again, and the cluster's images/sec before the fault,
while the task was down (fault to ready) and after, each counted from the updates (or gradient
pushes) the workers finished in that phase, by their worker-side end times. The coordinator's
own series cannot show this: asynchronous rounds are queued at once and fetched in order, so a
round stuck on the dead worker is followed by rounds that finished meanwhile. Also the closure
results lost with the worker and, asynchronous, the updates the ps applied without a closure
result coming back (lost results, closures run again after their update had landed).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple


def _ends(task_records: Sequence[dict]) -> List[Tuple[float, float, str, int]]:
    """(start, end, worker, images) of every measured worker step."""
    out = []
    for r in task_records:
        if r.get("kind") == "task" and r.get("role") == "worker":
            for start, duration in zip(r["step_start_wall"], r["step_times_s"]):
                out.append((start, start + duration, f"worker_{r['index']}", int(r["images_per_step"])))
    return sorted(out, key=lambda s: s[1])


def _rate(steps, start: float, end: Optional[float]) -> Optional[float]:
    if end is None or end <= start:
        return None
    return sum(s[3] for s in steps if start < s[1] <= end) / (end - start)


def _resumed(fault: dict, task_records: Sequence[dict], steps) -> Dict:
    """A cluster restarted from its last checkpoint: the step it resumed from, the steps it had
    to do again, and the time from the fault to the first measured step after the restart."""
    restored = max([int(r.get("restored_from_step") or 0) for r in task_records if r.get("kind") == "task"] or [0])
    warmup = max([int(r.get("num_warmup_steps") or 0) for r in task_records if r.get("kind") == "task"] or [0])
    resumed = min(s[0] for s in steps) if steps else None
    return {"task": fault["task"], "kind": fault["kind"], "recovered_by": "every task restarted from the last checkpoint",
            "restored_from_step": restored,
            "steps_redone": max(0, warmup + int(fault["applied_at_measured_step"]) - restored),
            "time_to_resume_s": resumed - fault["wall"] if resumed is not None else None}


def analyse(faults: Sequence[dict], task_records: Sequence[dict]) -> List[Dict]:
    """One entry per restarted fault; [] when the run has no worker step times."""
    steps = _ends(task_records)
    coordinator = next((r for r in task_records if r.get("cluster_steps")), {})
    if not steps:
        return []
    first, last = min(s[0] for s in steps), steps[-1][1]
    out = [_resumed(fault, task_records, steps) for fault in faults if "cluster_restarted_wall" in fault]
    for fault in faults:
        if "restarted_wall" not in fault:
            continue
        down, up = fault["wall"], fault.get("ready_wall")
        back = next((s[1] for s in steps if s[2] == fault["task"] and s[1] > (up or down)), None)
        entry = {"task": fault["task"], "kind": fault["kind"], "time_to_ready_s": fault.get("time_to_ready_s"),
                 "time_to_first_update_s": back - down if back is not None else None,
                 "images_per_sec_before": _rate(steps, first, min(down, last)),
                 "images_per_sec_during": _rate(steps, down, up),
                 "images_per_sec_after": _rate(steps, up, last) if up is not None else None,
                 "phases": "by worker-side end time: window start to the fault, the fault to the task ready "
                           "again, ready to the window's end",
                 "closure_results_lost": coordinator.get("closure_results_lost")}
        closures = sum((coordinator.get("closures_per_worker") or {}).values())
        if coordinator.get("updates") is not None and closures and not coordinator.get("ps_sync"):
            late = int(coordinator.get("late_updates") or 0)  # bounded staleness: finished after the window
            entry["updates_without_result"] = max(0, int(coordinator["updates"]) - closures - late)
        if coordinator.get("ps_sync"):
            entry["note"] = ("a worker killed while adding its gradient can leave part of it in that global step's "
                             "accumulators: that one update may then hold more than one gradient from the worker")
        out.append(entry)
    return out
