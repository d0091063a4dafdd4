"""Where a parameter-server worker's time goes: input, pull, compute, push and waiting.

Each closure stamps four times on its worker: its start, its batch in hand (the wait for the
input pipeline ends), the moment every gradient exists and its end (update applied or gradient
added on the ps). An unbounded asynchronous closure reads its weights as it starts, beside its
batch, as TensorFlow's tutorial step does (a synchronous one, and one under a staleness bound,
once the batch is in hand); the rows its batch looks up come after the batch. Batch to gradients
is the pull of the weights not done by then and the computation, which TensorFlow overlaps (a
layer's weights arrive while earlier layers compute), so they cannot be told apart inside an
update; gradients to end is the push. The pull is therefore also measured on its own: after the
measured window, closures that only read every weight onto the worker. Inside a closure the pull
is that probe's time (at most the closure's batch-to-gradients; when its reads started beside the
batch, only what the wait for the batch did not hide) and compute the rest, an estimate that is
low by whatever of the pull the overlap hid. Waiting is the measured window minus the time closures ran (the
idleness ratio): the coordinator's dispatch and, synchronous, the barrier.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence

DEFINITION = ("per update on this worker: input = start to its batch in hand, pull_and_compute = batch in hand to "
              "every gradient computed, push = gradients to the update applied (sync: added into the ps "
              "accumulators), pull = a pull-only closure measured after the window (median), compute = "
              "pull_and_compute - pull (an estimate: the real step overlaps the two), wait = (window - time in "
              "closures) / updates")
PHASES = ("input", "pull", "compute", "push")  # one after another inside a closure


def _mean(values: List[float]) -> Optional[float]:
    return statistics.fmean(values) if values else None


def _in_hand(c: Dict) -> float:
    """When the closure had its batch (a closure of an older tfbench: at its start)."""
    return min(max(c.get("input", c["start"]), c["start"]), c["computed"])


def _after_batch(pull: float, c: Dict, beside: bool) -> float:
    """The part of the pull a closure spent after its batch was in hand: all of it, or, when its
    reads started beside the batch (`beside`: an unbounded asynchronous closure), what the wait
    for the batch did not hide."""
    return max(0.0, pull - (_in_hand(c) - c["start"])) if beside else pull


def phases(c: Dict, pull: float, beside: bool = False) -> Dict[str, tuple]:
    """The closure's phases as (from, to) on its worker's clock: input, pull (the probe's time, or
    its part after the batch, at most the closure's batch-to-gradients), compute (the rest up to
    the gradients), push."""
    batch = _in_hand(c)
    pulled = batch + min(_after_batch(pull, c, beside), max(0.0, c["computed"] - batch))
    computed = max(c["computed"], pulled)
    return {"input": (c["start"], batch), "pull": (batch, pulled), "compute": (pulled, computed),
            "push": (computed, max(c["end"], computed))}


def split(closures: List[Dict], pulls: List[Dict], window_s: float, beside: bool = False) -> Dict:
    """The split of one worker's measured closures (dicts with start, input, computed and end);
    `beside`: their reads started beside their batch (phases)."""
    if not closures:
        return {"updates": 0}
    inputs = _mean([_in_hand(c) - c["start"] for c in closures])
    pull_compute = _mean([c["computed"] - _in_hand(c) for c in closures])
    push = _mean([max(0.0, c["end"] - c["computed"]) for c in closures])
    pull = statistics.median([p["end"] - p["start"] for p in pulls]) if pulls else None
    busy = sum(c["end"] - c["start"] for c in closures)
    waiting = max(0.0, window_s - busy)
    n = len(closures)
    shares = {"input": inputs * n / window_s, "pull_and_compute": pull_compute * n / window_s,
              "push": push * n / window_s, "waiting": waiting / window_s} if window_s > 0 else {}
    return {
        "updates": n,
        "input_s": inputs,
        "pull_and_compute_s": pull_compute,
        "pull_s": pull,
        "compute_s": (max(0.0, pull_compute - _mean([_after_batch(pull, c, beside) for c in closures]))
                      if pull is not None else None),
        "push_s": push,
        "wait_s": waiting / n,
        "window_share": shares,
        "pull_probes": len(pulls),
        "definition": DEFINITION,
    }


COMMON_METHODS = {
    "communication": "measured: pull + push (see pull and push)",
    "pull": "measured alone: closures that only read every weight onto their worker, after the window, all "
            "workers at once as in a step; median per worker (inside a closure at most its batch-to-gradients)",
}
SYNC_METHODS = dict(
    COMMON_METHODS,
    input="measured: each closure's start to its batch in hand (tf.timestamp on the worker), mean over the "
          "global step's closures",
    compute="derived: each closure's batch in hand to every gradient computed (tf.timestamp on the worker) less "
            "its worker's pull, mean over the global step's closures (low by whatever of the pull TensorFlow "
            "overlapped with the computation)",
    push="measured: every gradient computed to the gradient added into the ps accumulators, mean over the global "
         "step's closures",
    apply="measured: the update applied on the ps, as the coordinator saw it",
    waiting="derived: the global step less its other parts (the coordinator's dispatch and the barrier for the "
            "slowest worker)",
)
ASYNC_METHODS = dict(
    COMMON_METHODS,
    input="measured: the workers' time in the round waiting for their batches (closure start to batch in hand, "
          "tf.timestamp on the worker), summed over workers and divided by their number",
    compute="derived: the workers' time in the round from batch in hand to every gradient computed, less each "
            "closure's pull, summed over workers and divided by their number (low by whatever of the pull "
            "TensorFlow overlapped with the computation)",
    push="measured: the workers' time in the round from every gradient computed to the update applied, summed "
         "over workers and divided by their number",
    apply="inside push: an asynchronous push returns once its update is applied",
    waiting="derived: the round less its other parts, i.e. the workers' time in it with no closure running, "
            "divided by their number (the coordinator's dispatch, results fetched, a worker idle)",
)



def global_steps(closures: List[Dict], steps: List, first_round: int, pulls: Dict[int, float],
                 apply_s: Optional[List[float]], workers: int = 0, beside: bool = False) -> Optional[Dict]:
    """Per global step (one sync step, or one round of N asynchronous updates): input, pull,
    compute, push, apply and waiting, for tfbench.measure.breakdown. `steps` are the coordinator's
    timings of rounds first_round, first_round+1, ...; closures carry the round they were
    fetched in. Synchronous (apply_s given): the step's own closures, which ran inside it.
    Asynchronous: what the `workers` did inside each round's interval (asynchronous_rounds)."""
    if not steps or not pulls:
        return None
    if apply_s is None:
        return asynchronous_rounds(closures, steps, pulls, workers, beside)
    by_round: Dict[int, List[Dict]] = {}
    for c in closures:
        by_round.setdefault(c.get("round"), []).append(c)
    per_step: Dict[str, List[float]] = {k: [] for k in ("compute", "communication", "input", "pull", "push",
                                                        "apply", "waiting")}
    for i, step in enumerate(steps):
        mine = by_round.get(first_round + i) or []
        if not mine or any(c["worker"] not in pulls for c in mine):
            return None
        spans = [phases(c, pulls[c["worker"]]) for c in mine]
        mean = {p: statistics.fmean(s[p][1] - s[p][0] for s in spans) for p in PHASES}
        _append(per_step, mean, apply_s[i], step.duration_s)
    return {"per_step_s": per_step, "source": "the coordinator's closures and probes", "methods": dict(SYNC_METHODS)}


def asynchronous_rounds(closures: List[Dict], steps: Sequence, pulls: Dict[int, float], workers: int,
                        beside: bool = False) -> Optional[Dict]:
    """Each round's interval [start, start + duration] on the coordinator's clock, split by what
    the workers did inside it: every measured closure's phases (phases()) clipped to the interval,
    summed over workers and divided by their number; waiting is the rest, the workers' time in the
    round with no closure of theirs running. The parts of every round add up to it.

    A round's closures are those of its place in the queue, not those that ran during it: closures
    scheduled a phase ahead run whenever a worker is free, and a round whose closures had all
    finished by the time the previous round's last one was fetched lasts almost nothing. Its
    closures' own times, charged to it, made its parts exceed it, and waiting (never below 0) was
    then counted too high over the run: the parts of docs/network.md's latency example added up to
    122% of the step. Times are compared on one clock: the workers' tf.timestamp and the
    coordinator's time.time() (one machine, or hosts whose clocks agree)."""
    if any(c["worker"] not in pulls for c in closures) or workers < 1:
        return None
    spans = [phases(c, pulls[c["worker"]], beside) for c in closures]
    per_step: Dict[str, List[float]] = {k: [] for k in ("compute", "communication", "input", "pull", "push",
                                                        "apply", "waiting")}
    for step in steps:
        a, b = step.start_wall, step.start_wall + step.duration_s
        inside = {p: sum(max(0.0, min(b, s[p][1]) - max(a, s[p][0])) for s in spans) / workers for p in PHASES}
        _append(per_step, inside, 0.0, step.duration_s)
    return {"per_step_s": per_step, "source": "the coordinator's rounds and the workers' closures and probes",
            "methods": dict(ASYNC_METHODS)}


def _append(per_step: Dict[str, List[float]], mean: Dict[str, float], apply: float, step_s: float) -> None:
    busy = sum(mean.values()) + apply
    for key, value in (("compute", mean["compute"]), ("pull", mean["pull"]), ("push", mean["push"]),
                       ("communication", mean["pull"] + mean["push"]), ("input", mean["input"]),
                       ("apply", apply), ("waiting", max(0.0, step_s - busy))):
        per_step[key].append(value)


def pull_medians(pulls: List[Dict]) -> Dict[int, float]:
    """Each worker's median pull-only closure."""
    by_worker: Dict[int, List[float]] = {}
    for p in pulls:
        by_worker.setdefault(p["worker"], []).append(p["end"] - p["start"])
    return {w: statistics.median(v) for w, v in by_worker.items()}
