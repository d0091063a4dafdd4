"""The per-task timing loop: warm-up steps, then measured steps, each timed until its result
is on the host. Reporting (progress file, TensorBoard, console) happens between steps, outside
the timed region."""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, List, Optional

from tfbench.loop import progress
from tfbench.tensorboard import timeline
from tfbench.tensorboard.events import EventWriter


@dataclasses.dataclass(frozen=True)
class StepTiming:
    start_wall: float  # time.time() when the step started
    duration_s: float  # perf_counter() interval, ending when the result reached the host


class Reporter:
    """Where a task reports its steps: progress file (launcher), TensorBoard, console."""

    def __init__(self, run_dir: str, task_name: str, tb_dir: str, config, images_per_step: int):
        self.run_dir, self.task_name, self.config = run_dir, task_name, config
        self.images_per_step = images_per_step
        self.events = EventWriter(tb_dir, suffix=".perf")
        self.total = config.total_steps
        self.origin = timeline.origin(run_dir)

    def phase(self, phase: str, step: int = 0) -> None:
        progress.write_progress(self.run_dir, self.task_name, phase, step, self.total)

    def step_axis(self, wall: float) -> int:
        """The run's shared TensorBoard step axis (ms since the run started) at `wall`."""
        return timeline.step_ms(self.origin, wall)

    def step_done(self, i: int, timing: StepTiming, measured: bool) -> None:
        c = self.config
        if measured:
            end = timing.start_wall + timing.duration_s
            self.events.scalars({"perf/step_time_ms": timing.duration_s * 1e3,
                                 "perf/images_per_sec": self.images_per_step / timing.duration_s},
                                step=self.step_axis(end), wall_time=end)
        self.phase("measure" if measured else "warmup", i + 1)
        if (i + 1) % c.display_every == 0 or i + 1 == self.total:
            label = "measured" if measured else "warm-up"
            print(f"{self.task_name}: step {i + 1}/{self.total} ({label}) "
                  f"{timing.duration_s * 1e3:.1f} ms, {self.images_per_step / timing.duration_s:.1f} images/sec",
                  flush=True)

    def close(self) -> None:
        self.events.close()


class Profiler:
    """Captures a TensorFlow profile of steps first..last (--profile: the measured window;
    --profile_steps a,b), each step wrapped in a step marker (tf.profiler.experimental.Trace with
    step_num and _r=1), so that TensorBoard's Profile overview splits the trace into steps."""

    STEP_NAME = "train"  # the marker's name: the Profile plugin reads step markers named like this

    def __init__(self, steps, logdir: str):
        self.first, self.last = (min(steps), max(steps)) if steps else (-1, -1)
        self.logdir, self.active, self.step = logdir, False, None

    def before(self, i: int) -> None:
        from tfbench.framework.tf_import import tf

        if i == self.first and not self.active:  # a step run again (Horovod elastic) starts it once
            tf.profiler.experimental.start(self.logdir)
            self.active = True
        if self.active:
            self.step = tf.profiler.experimental.Trace(self.STEP_NAME, step_num=i, _r=1)
            self.step.__enter__()

    def after(self, i: int) -> None:
        if self.step is not None:
            self.step.__exit__(None, None, None)
            self.step = None
        if self.active and i == self.last:
            from tfbench.framework.tf_import import tf

            tf.profiler.experimental.stop()
            self.active = False


class StepHooks:
    """Several before(i)/after(i) hooks (profiler, evaluation) called as one, in order."""

    def __init__(self, *hooks):
        self.hooks = [h for h in hooks if h is not None]

    def before(self, i: int) -> None:
        for hook in self.hooks:
            hook.before(i)

    def after(self, i: int) -> None:
        for hook in self.hooks:
            hook.after(i)


def first_measured_step(config, first_step: int = 0) -> int:
    """The first step timed: after the warm-up, and never the first step after a restore from a
    checkpoint at `first_step` (it traces the step function again)."""
    return max(config.num_warmup_steps, first_step + 1 if first_step else 0)


def run_steps(step: Callable[[], object], config, reporter: Optional[Reporter] = None,
              hooks=None,
              first_warmup: Optional[Callable[[Callable[[], object]], object]] = None,
              first_step: int = 0) -> List[StepTiming]:
    """Runs warm-up + measured steps; returns the measured steps' timings only.

    `hooks` (a Profiler, StepHooks) get before(i) and after(i) around step i, outside its timing.
    `step` must return only once its result is materialised on the host (e.g. `.numpy()`).
    `first_warmup(step)`, if given, runs the first warm-up step instead (e.g. with run metadata
    on, to see where ops were placed); it is never used on a measured step. `first_step` > 0
    resumes after a restore: steps before it are done, and the first one run traces the step
    again, so it is never measured either.
    """
    measured: List[StepTiming] = []
    first_measured = first_measured_step(config, first_step)
    for i in range(first_step, config.total_steps):
        if hooks:
            hooks.before(i)
        start_wall = time.time()
        t0 = time.perf_counter()
        if i == first_step and first_warmup is not None and config.num_warmup_steps > first_step:
            first_warmup(step)
        else:
            step()
        timing = StepTiming(start_wall, time.perf_counter() - t0)
        if hooks:
            hooks.after(i)
        is_measured = i >= first_measured
        if is_measured:
            measured.append(timing)
        if reporter:
            reporter.step_done(i, timing, is_measured)
    return measured
