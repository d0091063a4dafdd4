"""Where a task's start-up time goes: wall-clock marks of its phases, in order.

launched (`python -m tfbench` started: validation, environment, monitor, spawning follow) ->
process_start (the kernel's creation time of the task process) -> tf_imported ->
strategy_ready (strategy built: collectives or the parameter-server cluster connected) ->
model_built (model and optimizer in the strategy's scope) -> first_step_done (warm-up step 0:
tracing, compilation and one run) -> measuring (the first measured step starts). One task runs
per process, so the marks are kept per process; the task record carries them and the seconds
each phase took.
"""
from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Tuple

LAUNCHED_ENV = "TFBENCH_LAUNCHED_AT"  # set by the launcher, inherited by every task it starts
PHASES = ("launched", "process_start", "tf_imported", "strategy_ready", "model_built", "first_step_done", "measuring")
_marks: List[Tuple[str, float]] = []


def process_start_time() -> float:
    """Wall time this process started, to the kernel's 10 ms tick (psutil's create_time adds the
    boot time, which the kernel gives in whole seconds)."""
    with open("/proc/self/stat", encoding="utf-8") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


def reset() -> None:
    _marks.clear()


def mark(phase: str, wall: Optional[float] = None) -> None:
    """Records that `phase` ended now (or at `wall`); only the first mark of a phase counts."""
    if phase not in PHASES:
        raise ValueError(f"unknown start-up phase {phase!r}; phases are {', '.join(PHASES)}")
    if any(name == phase for name, _ in _marks):
        return
    _marks.append((phase, time.time() if wall is None else wall))


def watch(reporter, num_warmup_steps: int) -> None:
    """Marks first_step_done and measuring from the steps `reporter` is told about."""
    step_done = reporter.step_done

    def observed(i, timing, measured):
        if i == 0:
            mark("first_step_done", timing.start_wall + timing.duration_s)
        if measured and i == num_warmup_steps:
            mark("measuring", timing.start_wall)
        return step_done(i, timing, measured)

    reporter.step_done = observed


def summary(from_launch: bool = True) -> Dict:
    """{'marks': {phase: wall time}, 'seconds': {phase: time since the previous mark},
    'total_s': launch (else process start) to the first measured step (or to the last mark)}.
    from_launch=False for a process started later than its run (a Horovod elastic rank restarted
    by horovodrun's driver): its start-up counts from its own process start."""
    given = [("process_start", process_start_time())]
    if from_launch and os.environ.get(LAUNCHED_ENV):
        given.append(("launched", float(os.environ[LAUNCHED_ENV])))
    marks = sorted(_marks + given, key=lambda m: PHASES.index(m[0]))
    marks = [m for i, m in enumerate(marks) if i == 0 or m[0] != marks[i - 1][0]]
    seconds = {name: wall - marks[i - 1][1] for i, (name, wall) in enumerate(marks) if i > 0}
    return {"marks": dict(marks), "seconds": seconds, "total_s": marks[-1][1] - marks[0][1]}


def render(startup: Dict) -> str:
    """One line, e.g. 'start-up 41.2 s: tf_imported 6.1, strategy_ready 0.4, ...'."""
    seconds = startup["seconds"]  # records store keys sorted: print in phase order
    parts = ", ".join(f"{name} {seconds[name]:.1f}" for name in PHASES if name in seconds)
    return f"start-up {startup['total_s']:.1f} s: {parts}"
