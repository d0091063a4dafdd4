"""Where a parameter-server worker's time goes: pull, compute, push and waiting.

Each closure stamps three times on its worker: its start, the moment every gradient exists and
its end (update applied or gradient added on the ps). Start to gradients is the pull of the
weights and the computation, which TensorFlow overlaps (a layer's weights arrive while earlier
layers compute), so they cannot be told apart inside an update; gradients to end is the push.
The pull is therefore also measured on its own: after the measured window, closures that only
read every weight onto the worker. Compute is the rest of start-to-gradients, an estimate that
is low by whatever of the pull the overlap hid. Waiting is the measured window minus the time
closures ran (the idleness ratio): the coordinator's dispatch and, synchronous, the barrier.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional

DEFINITION = ("per update on this worker: pull_and_compute = start to every gradient computed, push = gradients to "
              "the update applied (sync: added into the ps accumulators), pull = a pull-only closure measured "
              "after the window (median), compute = pull_and_compute - pull (an estimate: the real step overlaps "
              "the two), wait = (window - time in closures) / updates")


def _mean(values: List[float]) -> Optional[float]:
    return statistics.fmean(values) if values else None


def split(closures: List[Dict], pulls: List[Dict], window_s: float) -> Dict:
    """The split of one worker's measured closures (dicts with start, computed and end)."""
    if not closures:
        return {"updates": 0}
    pull_compute = _mean([c["computed"] - c["start"] for c in closures])
    push = _mean([max(0.0, c["end"] - c["computed"]) for c in closures])
    pull = statistics.median([p["end"] - p["start"] for p in pulls]) if pulls else None
    busy = sum(c["end"] - c["start"] for c in closures)
    waiting = max(0.0, window_s - busy)
    shares = {"pull_and_compute": pull_compute * len(closures) / window_s, "push": push * len(closures) / window_s,
              "waiting": waiting / window_s} if window_s > 0 else {}
    return {
        "updates": len(closures),
        "pull_and_compute_s": pull_compute,
        "pull_s": pull,
        "compute_s": max(0.0, pull_compute - pull) if pull is not None else None,
        "push_s": push,
        "wait_s": waiting / len(closures),
        "window_share": shares,
        "pull_probes": len(pulls),
        "definition": DEFINITION,
    }



STEP_METHODS = {
    "compute": "derived: each closure's start to every gradient computed (tf.timestamp on the worker) less its "
               "worker's pull, mean over the global step's closures (low by whatever of the pull TensorFlow "
               "overlapped with the computation)",
    "communication": "measured: pull + push (see pull and push)",
    "pull": "measured alone: closures that only read every weight onto their worker, after the window, all "
            "workers at once as in a step; median per worker",
    "push": "measured: every gradient computed to the update applied (sync: added into the ps accumulators), "
            "mean over the global step's closures",
    "waiting": "derived: the global step less its other parts (the coordinator's dispatch, and for sync the "
               "barrier for the slowest worker)",
}
APPLY_METHOD = {True: "measured: the update applied on the ps, as the coordinator saw it",
                False: "inside push: an asynchronous push returns once its update is applied"}


def global_steps(closures: List[Dict], steps: List, first_round: int, pulls: Dict[int, float],
                 apply_s: Optional[List[float]]) -> Optional[Dict]:
    """Per global step (one sync step, or one round of N asynchronous updates): pull, compute,
    push, apply and waiting, for tfbench.measure.breakdown. `steps` are the coordinator's timings
    of rounds first_round, first_round+1, ...; closures carry the round they were fetched in."""
    if not steps or not pulls:
        return None
    by_round: Dict[int, List[Dict]] = {}
    for c in closures:
        by_round.setdefault(c.get("round"), []).append(c)
    per_step: Dict[str, List[float]] = {k: [] for k in ("compute", "communication", "pull", "push", "apply",
                                                        "waiting")}
    for i, step in enumerate(steps):
        mine = by_round.get(first_round + i) or []
        if not mine or any(c["worker"] not in pulls for c in mine):
            return None
        pull = _mean([pulls[c["worker"]] for c in mine])
        compute = max(0.0, _mean([c["computed"] - c["start"] for c in mine]) - pull)
        push = _mean([max(0.0, c["end"] - c["computed"]) for c in mine])
        apply = apply_s[i] if apply_s else 0.0
        for key, value in (("compute", compute), ("pull", pull), ("push", push), ("communication", pull + push),
                           ("apply", apply), ("waiting", max(0.0, step.duration_s - compute - pull - push - apply))):
            per_step[key].append(value)
    return {"per_step_s": per_step, "source": "the coordinator's closures and probes",
            "methods": dict(STEP_METHODS, apply=APPLY_METHOD[apply_s is not None])}


def pull_medians(pulls: List[Dict]) -> Dict[int, float]:
    """Each worker's median pull-only closure."""
    by_worker: Dict[int, List[float]] = {}
    for p in pulls:
        by_worker.setdefault(p["worker"], []).append(p["end"] - p["start"])
    return {w: statistics.median(v) for w, v in by_worker.items()}
