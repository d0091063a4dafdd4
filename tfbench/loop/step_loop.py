"""The one step loop every strategy drives: which steps run, which are measured, and what happens
around each step.

A strategy supplies only what one step is: `step(i)` runs step i. The loop decides everything
else, once, for every strategy:

- the range: from `first_step` (0, or the step a checkpoint held) to the run's last step;
- the first measured step (`first_measured_step`): after the warm-up, never the first step
  after a restore (it traces the step function again), nor before the step a Horovod elastic
  rank joined at;
- the measuring callback (`on_measure_start`), once, just before the first measured step's hooks;
- hooks.before(i) and hooks.after(i) around each step, outside its timing;
- the reporter's step_done after hooks.after, and the timings kept (`Done`, measured or not).

Timing: a step that returns a `Timed` timed itself (a parameter-server round, which the
coordinator times from scheduling or the previous round's completion); any other step is timed
by the loop from just before the call until it returns, which must be once its result is on
the host. `finish(i)`, if given, is the step's tail, timed with it, that may raise after the
step is done (a Horovod elastic commit): the step is recorded before the exception goes on.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, List, Optional


@dataclasses.dataclass(frozen=True)
class StepTiming:
    start_wall: float  # time.time() when the step started
    duration_s: float  # perf_counter() interval, ending when the result reached the host


@dataclasses.dataclass(frozen=True)
class Timed:
    """What a step that times itself returns: its timing and what the strategy keeps of it."""

    timing: StepTiming
    kept: object = None


@dataclasses.dataclass(frozen=True)
class Done:
    """One step the loop ran: its number, timing, whether it was measured, what was kept of it
    (a Timed step's `kept`, else the step's return value)."""

    index: int
    timing: StepTiming
    measured: bool
    kept: object = None


def first_measured_step(config, first_step: int = 0) -> int:
    """The first step timed: after the warm-up, and never the first step after a restore from a
    checkpoint at `first_step` (it traces the step function again)."""
    return max(config.num_warmup_steps, first_step + 1 if first_step else 0)


class StepLoop:
    """The loop of one task. `first_step`: where the run resumes (the step a checkpoint held, or
    the step a Horovod elastic rank joined at); the first measured step follows from it once.
    `step_scalars(done)`, if given, are more TensorBoard scalars written at each step's end."""

    def __init__(self, config, first_step: int = 0, reporter=None, hooks=None,
                 on_measure_start: Optional[Callable[[], None]] = None,
                 step_scalars: Optional[Callable[[Done], dict]] = None):
        self.config, self.reporter, self.hooks = config, reporter, hooks
        self.first_step, self.last_step = first_step, config.total_steps
        self.first_measured = first_measured_step(config, first_step)
        self.on_measure_start, self.step_scalars = on_measure_start, step_scalars
        self.measuring = False
        self.done: List[Done] = []

    def run(self, step: Callable[[int], object], start: Optional[int] = None,
            first_warmup: Optional[Callable[[Callable[[], object]], object]] = None,
            finish: Optional[Callable[[int], None]] = None) -> List[Done]:
        """Runs steps start..last-1 (start: first_step, or where a Horovod elastic reset resumed);
        returns every step done so far. `first_warmup(run_step)`, if given, runs the first
        warm-up step instead (e.g. with run metadata on, to see where ops were placed); never a
        measured step."""
        start = self.first_step if start is None else start
        for i in range(start, self.last_step):
            if i >= self.first_measured and not self.measuring:
                self.measuring = True
                if self.on_measure_start is not None:
                    self.on_measure_start()
            if self.hooks:
                self.hooks.before(i)
            start_wall, t0 = time.time(), time.perf_counter()
            if i == start == self.first_step and first_warmup is not None and i < self.config.num_warmup_steps:
                result = first_warmup(lambda: step(i))
            else:
                result = step(i)
            if isinstance(result, Timed):
                self._record(i, result.timing, result.kept)
                continue
            try:
                if finish is not None:
                    finish(i)
            finally:
                self._record(i, StepTiming(start_wall, time.perf_counter() - t0), result)
        return self.done

    def _record(self, i: int, timing: StepTiming, kept) -> None:
        """Step i is done: its hooks' after, the step kept, the reporter told."""
        if self.hooks:
            self.hooks.after(i)
        done = Done(i, timing, i >= self.first_measured, kept)
        self.done.append(done)
        if self.reporter:
            self.reporter.step_done(i, timing, done.measured)
            if self.step_scalars is not None:
                end = timing.start_wall + timing.duration_s
                self.reporter.events.scalars(self.step_scalars(done), step=self.reporter.step_axis(end),
                                             wall_time=end)

    @property
    def timings(self) -> List[StepTiming]:
        """The measured steps' timings, in order."""
        return [d.timing for d in self.done if d.measured]

    def kept(self, measured: bool = True) -> list:
        """What was kept of the measured steps (or of the warm-up steps), in order."""
        return [d.kept for d in self.done if d.measured == measured]
