"""The records of a parameter-server run: one Measurement per worker (its closures' own times,
stamped on the worker) and the coordinator's, which is the cluster's step series (one sample
per global step, or per round of N asynchronous updates), from what the step loop returned."""
from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List

from strategies import ps_placement, ps_split, staleness
from strategies.base import Measurement
from strategies.ps_ops import PsLog
from tfbench.config import knobs
from tfbench.loop.step_loop import StepLoop, StepTiming
from tfbench.measure import comm

IDLENESS = ("share of the coordinator's measured window this worker ran no closure of its own: waiting for "
            "the coordinator's dispatch and, synchronous, for the slowest worker and the update (1 - busy / window)")


@dataclasses.dataclass
class PsRun:
    """What the coordinator's loop measured: its own steps (rounds), the measured closures, the
    warm-up's updates (clocks count from the first), the run's PsLog, the pull probe and the
    updates applied in the measured window; synchronous, each measured GlobalStep
    (strategies.ps_sync)."""

    first_step: int
    first_measured: int
    rounds: List[StepTiming]
    closures: List[dict]
    warmup_updates: List[dict]
    log: PsLog
    pulls: List[dict]
    updates: int
    sync: bool
    global_steps: list = dataclasses.field(default_factory=list)

    @classmethod
    def of(cls, loop: StepLoop, log: PsLog, pulls: List[dict], iterations: int, sync: bool) -> "PsRun":
        """From the step loop: each step kept a round's closures (asynchronous) or a GlobalStep."""
        measured = loop.kept(measured=True)
        if sync:
            closures = [c for step in measured for c in step.closures]
            warmup = []
        else:
            closures = [c for step in measured for c in step]
            warmup = [c for step in loop.kept(measured=False) for c in step]
        return cls(loop.first_step, loop.first_measured, loop.timings, closures, warmup, log, pulls,
                   iterations - log.updates_before, sync, measured if sync else [])

    @property
    def apply_s(self) -> List[float]:
        """Synchronous: the update on the ps of each measured global step."""
        return [g.apply_s for g in self.global_steps]

    @property
    def skipped(self) -> int:
        """Synchronous: closures that landed on a worker that had already contributed."""
        return sum(g.skipped for g in self.global_steps)

    def waits(self) -> Dict[int, List[float]]:
        """Synchronous: each worker's wait from its gradient push to its global step's end."""
        out: Dict[int, List[float]] = collections.defaultdict(list)
        for g in self.global_steps:
            end = g.start_wall + g.duration_s
            for c in g.closures:
                out[c["worker"]].append(max(0.0, end - c["end"]))
        return out


def measurements(adapter, run: PsRun) -> List[Measurement]:
    """One Measurement per worker (worker-side times) plus the coordinator's own, which is
    the cluster's step series (one sample per global step, or per round of N updates)."""
    closures, coordinator_steps, log = run.closures, run.rounds, run.log
    sync, train = run.sync, adapter.config.mode == "train"
    by_worker: Dict[int, List[dict]] = collections.defaultdict(list)
    for c in sorted(closures, key=lambda c: c["start"]):
        by_worker[c["worker"]].append(c)
    if train and not sync:
        clocks = staleness.clock_staleness(run.warmup_updates + closures + log.late_updates)
        for c in closures:
            c["staleness"] = c["applied"] - 1 - c["read"]
            c["clock_staleness"] = clocks.get(c["applied"])
    stale = staleness.by_worker((c["worker"], c["staleness"]) for c in closures if c.get("staleness") is not None)
    shards = ps_placement.bytes_per_ps(adapter.model.variables)
    base = dict(adapter.summary(), ps_sync=sync, num_ps=len(adapter.plan.cluster_spec.get("ps", [])),
                ps_staleness_bound=adapter.config.ps_staleness_bound, ps_shards=shards,
                **knobs.knobs_of(adapter.config))
    if train:
        base["comm_plan"] = comm.plan_parameter_server(
            [int(c.shape.num_elements()) * c.dtype.size for v in adapter.model.trainable_variables
             for c in (getattr(v, "variables", None) or [v])])
    if adapter.config.checkpoint_every:
        base.update(checkpoint_every=adapter.config.checkpoint_every, restored_from_step=run.first_step)
    last_global_end = coordinator_steps[-1].start_wall + coordinator_steps[-1].duration_s
    window_s = last_global_end - coordinator_steps[0].start_wall
    out = []
    for worker, mine in sorted(by_worker.items()):
        timings = [StepTiming(c["start"], c["end"] - c["start"]) for c in mine]
        if sync:
            extra = dict(base, step_label="gradient push",
                         step_definition="this worker's gradient closure (tf.timestamp on the worker): "
                                         "pull weights, compute, add the gradient into the ps accumulators",
                         wait_s=run.waits().get(worker, []),
                         window_end=last_global_end)  # its images count once the update is applied
        else:
            extra = dict(base, step_label="update" if train else "forward",
                         step_definition="one asynchronous update of this worker (tf.timestamp on the "
                                         "worker): pull weights, compute, push the update"
                         if train else "one forward pass of this worker (tf.timestamp on the worker)")
        extra["placement"] = adapter._placement("worker", worker)
        busy = sum(t.duration_s for t in timings)
        extra["idleness"] = min(1.0, max(0.0, 1.0 - busy / window_s)) if window_s > 0 else None
        extra["idleness_definition"] = IDLENESS
        if train:  # per update in the order of its timings, and summarised
            extra["staleness"] = stale.get(f"worker_{worker}", {"updates": 0})
            extra["staleness_per_update"] = [c["staleness"] for c in mine]
            if not sync:
                extra["clock_staleness_per_update"] = [c["clock_staleness"] for c in mine]
            extra["time_split"] = ps_split.split(mine, [p for p in run.pulls if p["worker"] == worker],
                                                 window_s)
        out.append(Measurement("worker", worker, adapter.config.batch_size, timings, extra))
    updates = run.updates
    measured_s = sum(t.duration_s for t in coordinator_steps)
    chief = dict(base, counts_toward_cluster=False, cluster_steps=True,
                 step_label="global step" if sync else f"{adapter.num_workers} updates",
                 step_definition=(
                     "global step (coordinator): one gradient from every worker accumulated on the ps, "
                     "then the update applied on the ps; from scheduling to the update applied" if sync else
                     f"{adapter.num_workers} {'updates' if train else 'forward passes'} (coordinator): one round "
                     f"of {adapter.num_workers} scheduled steps, from the previous round's completion to its own"),
                 updates=updates, updates_counted="measured window only",
                 # over the coordinator's own rounds; the cluster record's updates_per_sec uses the
                 # cluster's measured window, as images/sec does
                 updates_per_sec_of_rounds=updates / measured_s if measured_s > 0 else None,
                 closures_per_worker={str(w): len(t) for w, t in sorted(by_worker.items())},
                 closure_results_lost=log.lost,
                 placement=adapter._placement("chief", 0))
    if train:
        chief.update(staleness=stale, staleness_definition=staleness.DEFINITION)
    if train and not sync:
        if log.lost:  # their updates landed unseen: later clocks count one short
            chief["clock_staleness_note"] = (f"approximate: {log.lost} closure result(s) were lost with a "
                                             "killed worker, and their updates are missing from the clocks")
        chief.update(clock_staleness=staleness.summary(c["clock_staleness"] for c in closures),
                     clock_staleness_definition=staleness.CLOCK_DEFINITION, bound_waits=log.bound_waits,
                     late_updates=len(log.late_updates))
    chief["step_split"] = ps_split.global_steps(closures, coordinator_steps, run.first_measured,
                                                ps_split.pull_medians(run.pulls), run.apply_s if sync else None)
    if sync:
        chief.update(apply_step_s=run.apply_s, skipped_closures=run.skipped,
                     update_location="ps (accumulators and update on the ps tasks)")
    if adapter.evaluator is not None:
        chief["convergence"] = adapter.evaluator.summary()
    out.append(Measurement("chief", 0, adapter.config.batch_size * adapter.num_workers, coordinator_steps, chief))
    return out

