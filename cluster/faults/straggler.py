"""A straggler made on purpose (--straggler=TASK:FACTOR): one task runs 1/FACTOR of the time.

The launcher stops and continues the task's process group (SIGSTOP / SIGCONT) on a short period:
it runs PERIOD_S / FACTOR, then stops for the rest. A stopped process uses no CPU, so the
slowdown costs no other task anything, unlike a busy loop or a competing process; its peers see
only what a slow host shows them (late gradients, late all-reduce chunks, late replies). The
process group is continued whenever the straggler stops, so teardown never meets a stopped task.
"""
from __future__ import annotations

import os
import signal
import threading
from typing import Optional, Sequence

PERIOD_S = 0.02  # shorter than a step of even the tiny model, so each step sees the average


class Straggler:
    def __init__(self, pgid: int, slowdown: float, period_s: float = PERIOD_S):
        self.pgid, self.slowdown = pgid, slowdown
        self.run_s = period_s / slowdown
        self.stop_s = period_s - self.run_s
        self._done = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "Straggler":
        self._thread = threading.Thread(target=self._loop, name=f"straggler-{self.pgid}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ends the duty cycle and leaves the process group running."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._signal(signal.SIGCONT)

    def _loop(self) -> None:
        try:
            while not self._done.is_set():
                if not self._signal(signal.SIGCONT) or self._done.wait(self.run_s):
                    break
                if not self._signal(signal.SIGSTOP) or self._done.wait(self.stop_s):
                    break
        finally:
            self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> bool:
        try:
            os.killpg(self.pgid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False


class OnceReady:
    """The straggler of a launch: its duty cycle starts once its task reports ready, so its steps
    are slow and its start-up (TensorFlow's import, its server) is not, which would only delay the
    run's first step; a task that reports no progress (a ps) is slow from its start."""

    def __init__(self, task: str, pgid: int, config, progress_tasks: Sequence[str]):
        self.task, self.pgid, self.slowdown = task, pgid, config.straggler_slowdown
        self.running: Optional[Straggler] = None
        if task not in progress_tasks:
            self.poll(True)

    def poll(self, ready: bool) -> None:
        if ready and self.running is None:
            self.running = Straggler(self.pgid, self.slowdown).start()

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()


def describe(task: str, slowdown: float) -> dict:
    """What the records say about the straggler."""
    return {"task": task, "slowdown": slowdown,
            "method": f"SIGSTOP/SIGCONT of its process group every {PERIOD_S * 1e3:.0f} ms: it runs "
                      f"{100 / slowdown:.0f}% of the time and uses no CPU while stopped"}
