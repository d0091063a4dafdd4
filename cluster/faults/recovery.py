"""What a run did about its injected faults (--fault), read off the workers' own step times.

A Horovod elastic rank killed: how soon the others went on without it, how long the cluster ran
no step, when the rank joined again and examples/sec before, while it was out and after
(_rejoined, from the global steps merged by number, tfbench.measure.elastic_steps).

For each killed task that was restarted (a parameter-server worker): the time until it reported
ready again and until it finished an update again, and the cluster's examples/sec before the fault,
while the task was down (fault to ready) and after, each counted from the updates (or gradient
pushes) the workers finished in that phase, by their worker-side end times. The coordinator's
own series cannot show this: asynchronous rounds are queued at once and fetched in order, so a
round stuck on the dead worker is followed by rounds that finished meanwhile. Also the closure
results lost with the worker and, asynchronous, the updates the ps applied without a closure
result coming back (lost results, closures run again after their update had landed).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfbench.measure import elastic_steps


def _ends(task_records: Sequence[dict]) -> List[Tuple[float, float, str, int]]:
    """(start, end, worker, examples) of every measured worker step."""
    out = []
    for r in task_records:
        if r.get("kind") == "task" and r.get("role") == "worker":
            for start, duration in zip(r["step_start_wall"], r["step_times_s"]):
                out.append((start, start + duration, f"worker_{r['index']}", int(r["examples_per_step"])))
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


def analyse(faults: Sequence[dict], task_records: Sequence[dict], num_workers: Optional[int] = None) -> List[Dict]:
    """One entry per restarted fault; [] when the run has no worker step times."""
    if elastic_steps.applies(task_records):
        return [_rejoined(f, task_records, num_workers) for f in faults if f["kind"] == "kill" and "error" not in f]
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
                 "examples_per_sec_before": _rate(steps, first, min(down, last)),
                 "examples_per_sec_during": _rate(steps, down, up),
                 "examples_per_sec_after": _rate(steps, up, last) if up is not None else None,
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


def _rejoined(fault: dict, task_records: Sequence[dict], num_workers: Optional[int] = None) -> Dict:
    """A killed Horovod elastic rank, over the time it was out (the fault to the first step with
    every rank again, else to the window's end): the others' first step without it, the steps
    and fewest ranks they ran with, the time no step ran beyond the usual gap between steps
    (rolling back, rendezvous, waiting for the restarted rank), the resets, its return and
    examples/sec before, while out and after."""
    steps = elastic_steps.merged(task_records)
    ends = [(s.start, s.end, "", s.examples) for s in steps]  # _rate's (start, end, worker, examples)
    down = fault["wall"]
    entry = {"task": fault["task"], "kind": fault["kind"], "rejoined_by": "horovodrun's elastic driver",
             "time_to_ready_s": fault.get("time_to_ready_s"),
             "phases": "by global step end time: window start to the fault, the fault to the first step with every "
                       "rank again, then to the window's end"}
    if not steps:
        return entry
    full = num_workers or max(s.rank_count for s in steps)
    after = [s for s in steps if s.start >= down]
    back = next((s for s in after if s.rank_count >= full), None)
    until = back.start if back is not None else steps[-1].end
    out = [s for s in after if s.start < until]
    before = [s for s in steps if s.end <= down]
    usual = float(np.median([b.start - a.end for a, b in zip(before, before[1:])])) if len(before) > 1 else 0.0
    seq = out + ([back] if back is not None else [])
    entry.update(
        time_to_continue_s=out[0].end - down if out and out[0].rank_count < full else None,
        steps_with_fewer_ranks=sum(1 for s in out if s.rank_count < full),
        fewest_ranks=min(s.rank_count for s in out) if out else None,
        time_without_steps_s=(max(0.0, seq[0].start - down) + sum(max(0.0, b.start - a.end - usual)
                                                                  for a, b in zip(seq, seq[1:]))) if seq else None,
        time_to_first_update_s=back.end - down if back is not None else None,
        examples_per_sec_before=_rate(ends, steps[0].start, down),
        examples_per_sec_during=_rate(ends, down, until),
        examples_per_sec_after=_rate(ends, back.start, steps[-1].end) if back is not None else None,
        resets=max([sum(1 for e in r.get("elastic_resets") or [] if down <= e["wall"] <= (seq[-1].end if seq else down))
                    for r in task_records if r.get("kind") == "task"] or [0]))
    return entry
