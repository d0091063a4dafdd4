"""Where each global step's time goes: compute, communication, input, the ps' apply and waiting.

One sample per global step, summing to the cluster's own step time (records.cluster_steps), with
how each part was obtained. Two sources:

- synchronous strategies (MultiWorkerMirrored, Horovod, Mirrored, default): each rank stamps,
  inside its step, the moment every local gradient exists (before its all-reduce starts; on the
  host clock, as the step's start), and on the host the moment its batch was in hand. For global
  step i over ranks r with start s_r, batch in hand b_r, gradients done c_r and end e_r:
      input         = mean_r (b_r - s_r)                       measured: the wait for the batch
      compute       = mean_r (c_r - b_r)                       measured (in-step timestamp)
      waiting       = (max_r c_r - min_r s_r) - input - compute  measured: start skew + slower ranks
      communication = max_r e_r - max_r c_r                      measured: all-reduce and the update
  which sums to max_r e_r - min_r s_r, the global step. With no peers (default strategy) the
  update after the gradients is compute and communication is 0. Clocks of different hosts are
  compared, as for the global step itself. Records without the batch's mark (an older tfbench)
  count their input in compute.
- parameter servers: the coordinator splits each global step itself (strategies.parameter_server.split) into
  input (measured on the worker), pull (measured alone after the window), compute (derived), push
  (measured), apply (sync, measured) and waiting (the remainder); communication = pull + push.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence

PARTS = ("compute", "communication", "input", "apply", "waiting")
DETAIL = ("pull", "push")  # a parameter server's communication, in its two directions (not summed again)
TOLERANCE = 0.05  # the parts of a global step, summed, against the step: within 5% on average

INPUT_METHOD = ("measured: each rank's step start to its batch in hand on the host (the wait for the input "
                "pipeline), mean over ranks")
SYNC_METHODS = {
    "compute": "measured: each rank's batch in hand to every local gradient computed (tf.timestamp in the step), "
               "mean over ranks",
    "input": INPUT_METHOD,
    "communication": "measured: the last rank's gradients done to the last rank's step end (all-reduce and the "
                     "update, which cannot be timed apart inside one step)",
    "apply": "inside communication (the update follows the all-reduce in the same step)",
    "waiting": "measured: first rank's start to the last rank's gradients done, less the mean input and compute "
               "(start skew and slower ranks: the barrier)",
}
ALONE_METHODS = {
    "compute": "measured: the whole step but its input (forward, backward and update; one task, no peers)",
    "input": "measured: the step's start to its batch in hand on the host (the wait for the input pipeline)",
    "communication": "none: one task, no peers",
    "apply": "inside compute",
    "waiting": "none: one task, no peers",
}


def summarise(per_step: Dict[str, List[float]], steps_s: Sequence[float], methods: Dict[str, str],
              source: str, step_starts: Sequence[float] = ()) -> dict:
    """The record's breakdown: per global step and mean of each part, and the sum check."""
    steps_s = [float(t) for t in steps_s]
    kept = PARTS + tuple(d for d in DETAIL if per_step.get(d))
    per_step = {part: [float(v) for v in per_step.get(part) or [0.0] * len(steps_s)] for part in kept}
    sums = [sum(per_step[p][i] for p in PARTS) for i in range(len(steps_s))]
    step_mean = statistics.fmean(steps_s) if steps_s else 0.0
    residual = statistics.fmean([t - s for t, s in zip(steps_s, sums)]) if steps_s else 0.0
    return {
        "source": source,
        "unit": "seconds per global step",
        "methods": dict(methods),
        "per_step_s": per_step,
        "step_s": steps_s,
        "step_start_wall": [float(t) for t in step_starts],
        "mean_s": {part: statistics.fmean(values) if values else 0.0 for part, values in per_step.items()},
        "share": {part: (statistics.fmean(values) / step_mean if step_mean > 0 and values else 0.0)
                  for part, values in per_step.items()},
        "step_mean_s": step_mean,
        "sum_check": {"parts_mean_s": statistics.fmean(sums) if sums else 0.0, "residual_mean_s": residual,
                      "relative": abs(residual) / step_mean if step_mean > 0 else 0.0, "tolerance": TOLERANCE,
                      "within": step_mean <= 0 or abs(residual) / step_mean <= TOLERANCE},
    }


def sync_ranks(tasks: Sequence[dict], peers: bool) -> Optional[dict]:
    """The split of synchronous global steps from the ranks' in-step timestamps; None when a rank
    has none (XLA-compiled steps, records of an older tfbench, Horovod elastic)."""
    marks = [r.get("step_computed_wall") or [] for r in tasks]
    if not tasks or any(len(m) != len(r["step_times_s"]) or min(m, default=0.0) <= 0
                        for m, r in zip(marks, tasks)):
        return None
    # the batch in hand; a record without it (an older tfbench) had its batch at the step's start
    inputs = [r.get("step_input_wall") or r["step_start_wall"] for r in tasks]
    per_step: Dict[str, List[float]] = {part: [] for part in PARTS}
    steps, step_starts = [], []
    for i in range(min(len(r["step_times_s"]) for r in tasks)):
        starts = [r["step_start_wall"][i] for r in tasks]
        ends = [r["step_start_wall"][i] + r["step_times_s"][i] for r in tasks]
        done = [m[i] for m in marks]
        batch = [min(max(b[i], s), c) for b, s, c in zip(inputs, starts, done)]  # s <= b <= c
        total = max(ends) - min(starts)
        waited = statistics.fmean(b - s for b, s in zip(batch, starts))
        per_step["input"].append(waited)
        if not peers:
            per_step["compute"].append(total - waited)
            per_step["communication"].append(0.0)
            per_step["waiting"].append(0.0)
        else:
            compute = statistics.fmean(max(0.0, c - b) for c, b in zip(done, batch))
            per_step["compute"].append(compute)
            per_step["waiting"].append(max(0.0, max(done) - min(starts) - compute - waited))
            per_step["communication"].append(max(0.0, max(ends) - max(done)))
        per_step["apply"].append(0.0)
        steps.append(total)
        step_starts.append(min(starts))
    return summarise(per_step, steps, SYNC_METHODS if peers else ALONE_METHODS,
                     "in-step timestamps of every rank" if peers else "the task's own steps", step_starts)


def of_run(task_records: Sequence[dict], steps_s: Sequence[float]) -> dict:
    """The cluster record's breakdown: the coordinator's own split (parameter servers), else the
    ranks' timestamps; says why when there is none."""
    tasks = [r for r in task_records if r.get("kind") == "task"]
    for r in tasks:
        if r.get("step_split"):
            split = r["step_split"]
            return summarise(split["per_step_s"], steps_s, split["methods"], split["source"], r["step_start_wall"])
    measuring = [r for r in tasks if r.get("counts_toward_cluster", True)]
    peers = len(measuring) > 1 or any(int(r.get("local_replicas") or 1) > 1 for r in measuring)
    split = sync_ranks(measuring, peers)
    if split is None:
        return {"source": "none", "note": "no in-step timestamps: the step is compiled whole by XLA, or it is a "
                                          "Horovod elastic run, or the records come from an older tfbench"}
    return split


def line(breakdown: Optional[dict]) -> Optional[str]:
    """The run table's line: mean milliseconds of each part per global step, and how each was got."""
    if not breakdown or "mean_s" not in breakdown:
        return f"step split: {breakdown['note']}" if breakdown and breakdown.get("note") else None
    mean, check = breakdown["mean_s"], breakdown["sum_check"]
    measured = breakdown.get("methods") or {}
    parts = [f"{p} {mean[p] * 1e3:.1f}" for p in PARTS
             if mean.get(p) or p in ("compute", "communication") or (p == "input" and p in measured)]
    text = (f"step split, ms per global step ({breakdown['source']}): " + " + ".join(parts)
            + f" = {check['parts_mean_s'] * 1e3:.1f} of {breakdown['step_mean_s'] * 1e3:.1f} measured")
    if not check["within"]:
        text += f" (parts off by {check['relative']:.0%}, more than the {check['tolerance']:.0%} tolerance)"
    if input_dominates(breakdown):
        text += (f"\ninput-bound: the wait for batches is the largest part ({breakdown['share']['input']:.0%} of the "
                 f"step); more input threads (--input_threads) or cores would shorten it")
    return text


def input_dominates(breakdown: Optional[dict]) -> bool:
    """Whether the wait for input is the largest part of the mean global step."""
    mean = (breakdown or {}).get("mean_s") or {}
    return bool(mean.get("input")) and mean["input"] >= max(mean.get(p, 0.0) for p in PARTS)
