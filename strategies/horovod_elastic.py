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

import dataclasses
import time
from typing import List, Optional

from tfbench.loop.step_loop import Done, StepLoop, StepTiming


@dataclasses.dataclass
class ElasticSteps:
    """Its records' own part: each measured step's number and ranks, the resets this rank went
    through, the committed step it started from (None: it never stepped), the commit's mean."""

    step_index: List[int]
    step_ranks: List[int]
    elastic_resets: List[dict]
    joined_at_step: Optional[int]
    commit_ms_mean: Optional[float]


@dataclasses.dataclass
class ElasticLog:
    """What this rank did: its measured steps, the ranks in each, and every reset it went through."""

    timings: List[StepTiming] = dataclasses.field(default_factory=list)
    indices: List[int] = dataclasses.field(default_factory=list)
    rank_counts: List[int] = dataclasses.field(default_factory=list)
    resets: List[dict] = dataclasses.field(default_factory=list)
    commit_s: List[float] = dataclasses.field(default_factory=list)
    joined_at: Optional[int] = None  # the committed step this process started from

    def record(self, done: List[Done]) -> None:
        """The measured steps of the loop, each with the ranks that took part in it."""
        measured = [d for d in done if d.measured]
        self.timings = [d.timing for d in measured]
        self.indices = [d.index for d in measured]
        self.rank_counts = [d.kept for d in measured]

    def steps(self) -> ElasticSteps:
        mean = sum(self.commit_s) / len(self.commit_s) if self.commit_s else None
        return ElasticSteps(self.indices, self.rank_counts, self.resets, self.joined_at,
                            mean * 1e3 if mean is not None else None)


def run_steps(adapter, step, reporter=None, hooks=None) -> ElasticLog:
    """Runs the remaining steps of the run under hvd.elastic.run; returns what this rank measured.
    One StepLoop (tfbench.loop.step_loop) serves every entry into the loop: after a reset it
    resumes at the committed step, and the first measured step stays the one that follows from
    the step this process joined at."""
    hvd, config = adapter.hvd, adapter.config
    log = ElasticLog()
    state = hvd.elastic.TensorFlowKerasState(adapter.model, adapter.optimizer, batch=0)
    state.register_reset_callbacks([lambda: log.resets.append({"wall": time.time(), "ranks": hvd.size(),
                                                               "rank": hvd.rank()})])
    loops = []

    def one_step(i: int) -> int:
        """Step i; the number of ranks that took part in it is kept."""
        step()
        ranks = hvd.size()
        state.batch = i + 1
        return ranks

    def commit(i: int) -> None:
        """The step's tail: a commit that raises (new hosts, or a rank lost in its check) comes
        after the update, and the loop records the step before the exception goes on."""
        t1 = time.perf_counter()
        try:
            state.commit()
        finally:
            log.commit_s.append(time.perf_counter() - t1)

    @hvd.elastic.run
    def train(state):
        if not loops:  # after the first sync: 0, or the step the others were at
            log.joined_at = state.batch
            loops.append(StepLoop(config, state.batch, reporter, hooks,
                                  step_scalars=lambda done: {"perf/ranks": done.kept}))
        loops[0].run(one_step, start=state.batch, finish=commit)

    train(state)
    log.record(loops[0].done)
    return log
