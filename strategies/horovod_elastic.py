"""The Horovod elastic loop (--horovod_elastic): the same train step, with the model, optimizer
and step number committed after every step, so that ranks can leave and join between steps.

hvd.elastic.run wraps the loop: when a rank dies, the others' collective fails
(HorovodInternalError), they roll back to the last commit, rendezvous again without it and go
on; when horovodrun's driver has started a rank again, the others learn of it at their next
commit (HostsUpdatedInterrupt), rendezvous with it, and rank 0's state is broadcast to it before
the loop continues from the committed step. Commit and the check for new hosts are part of
every step here: that is what elasticity costs, and the step times include it.

Each measured step is recorded with its number and the ranks that took part in it, so that the
cluster's images can be counted from whichever ranks survived (tfbench.measure.elastic_steps).
"""
from __future__ import annotations

import time
from typing import List, Optional

from tfbench.loop import benchmark
from tfbench.loop.benchmark import StepTiming


class ElasticLog:
    """What this rank did: its measured steps, the ranks in each, and every reset it went through."""

    def __init__(self):
        self.timings: List[StepTiming] = []
        self.indices: List[int] = []
        self.ranks: List[int] = []
        self.resets: List[dict] = []
        self.commit_s: List[float] = []
        self.joined_at: Optional[int] = None  # the committed step this process started from

    def summary(self) -> dict:
        mean = sum(self.commit_s) / len(self.commit_s) if self.commit_s else None
        return {"step_index": self.indices, "step_ranks": self.ranks, "elastic_resets": self.resets,
                "joined_at_step": self.joined_at, "commit_ms_mean": mean * 1e3 if mean is not None else None}


def run_steps(adapter, step, reporter=None, hooks=None) -> ElasticLog:
    """Runs the remaining steps of the run under hvd.elastic.run; returns what this rank measured."""
    hvd, config = adapter.hvd, adapter.config
    log = ElasticLog()
    state = hvd.elastic.TensorFlowKerasState(adapter.model, adapter.optimizer, batch=0)
    state.register_reset_callbacks([lambda: log.resets.append({"wall": time.time(), "ranks": hvd.size(),
                                                               "rank": hvd.rank()})])

    @hvd.elastic.run
    def train(state):
        if log.joined_at is None:
            log.joined_at = state.batch  # after the first sync: 0, or the step the others were at
        first_measured = benchmark.first_measured_step(config, log.joined_at)
        while state.batch < config.total_steps:
            _one_step(state, step, hvd, log, first_measured, reporter, hooks)

    train(state)
    return log


def _one_step(state, step, hvd, log: ElasticLog, first_measured: int, reporter, hooks) -> None:
    """Step i, then the commit. A commit that raises (new hosts, or a rank lost in its check)
    comes after the update: the step is done and recorded before the exception goes on."""
    i = state.batch
    if hooks:
        hooks.before(i)
    start_wall, t0 = time.time(), time.perf_counter()
    step()
    ranks = hvd.size()
    state.batch = i + 1
    t1 = time.perf_counter()
    try:
        state.commit()
    finally:
        timing = StepTiming(start_wall, time.perf_counter() - t0)
        log.commit_s.append(time.perf_counter() - t1)
        if hooks:
            hooks.after(i)
        measured = i >= first_measured
        if measured:
            log.timings.append(timing)
            log.indices.append(i)
            log.ranks.append(ranks)
        if reporter:
            reporter.step_done(i, timing, measured)
            end = timing.start_wall + timing.duration_s
            reporter.events.scalars({"perf/ranks": ranks}, step=reporter.step_axis(end), wall_time=end)
