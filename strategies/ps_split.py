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

