"""What the step loop (tfbench.loop.step_loop) reports to and calls around each step: the
Reporter (progress file, TensorBoard, console, between steps, outside the timed region), the
Profiler and StepHooks."""
from __future__ import annotations

import time

from tfbench.loop import progress
from tfbench.loop.step_loop import StepTiming
from tfbench.tensorboard import timeline
from tfbench.tensorboard.events import EventWriter


# A step's progress is written at most this often within a phase (a phase's first step and the
# run's last always): the launcher reads it every 0.2 s, and a file replaced every step cost a
# coordinator of 100 short steps a second 5% of a core, on the cores its workers share
PROGRESS_EVERY_S = 0.1


class Reporter:
    """Where a task reports its steps: progress file (launcher), TensorBoard, console."""

    def __init__(self, run_dir: str, task_name: str, tb_dir: str, config, examples_per_step: int):
        self.run_dir, self.task_name, self.config = run_dir, task_name, config
        self.examples_per_step = examples_per_step
        self.workload = config.workload
        self.rate_tag = f"perf/{self.workload.unit}_per_sec"
        self.events = EventWriter(tb_dir, suffix=".perf")
        self.total = config.total_steps
        self.origin = timeline.origin(run_dir)
        self.written = ("", 0.0)  # the phase last written in the progress file, and when

    def phase(self, phase: str, step: int = 0) -> None:
        """The progress file at `step` of `phase`, unless it was written in this phase less than
        PROGRESS_EVERY_S ago (the run's last step is always written)."""
        now = time.monotonic()
        if phase == self.written[0] and step != self.total and now - self.written[1] < PROGRESS_EVERY_S:
            return
        progress.write_progress(self.run_dir, self.task_name, phase, step, self.total)
        self.written = (phase, now)

    def step_axis(self, wall: float) -> int:
        """The run's shared TensorBoard step axis (ms since the run started) at `wall`."""
        return timeline.step_ms(self.origin, wall)

    def step_done(self, i: int, timing: StepTiming, measured: bool) -> None:
        c = self.config
        if measured:
            end = timing.start_wall + timing.duration_s
            self.events.scalars({"perf/step_time_ms": timing.duration_s * 1e3,
                                 self.rate_tag: self.rate(timing.duration_s)},
                                step=self.step_axis(end), wall_time=end)
        self.phase("measure" if measured else "warmup", i + 1)
        if (i + 1) % c.display_every == 0 or i + 1 == self.total:
            label = "measured" if measured else "warm-up"
            print(f"{self.task_name}: step {i + 1}/{self.total} ({label}) "
                  f"{timing.duration_s * 1e3:.1f} ms, {self.rate(timing.duration_s):.1f} {self.workload.unit}/sec",
                  flush=True)

    def rate(self, duration_s: float) -> float:
        """This task's rate over one step, in the workload's unit."""
        return self.workload.per_unit(self.config, self.examples_per_step / duration_s)

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
