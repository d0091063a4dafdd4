"""The launcher's live status line.

On a terminal one line is rewritten in place; in CI logs (not a TTY) a line is printed only when
the tasks' state changed, and at most every few seconds, so that logs stay short.
"""
from __future__ import annotations

import time
from typing import Callable, Optional, Sequence, TextIO

from tfbench.loop import progress

PRINT_INTERVAL_S = 5.0


def phase_text(record: Optional[dict]) -> str:
    """"measure 4/10", "ready", or "running" for a task that reports no progress."""
    if record is None:
        return "running"
    if record["phase"] in ("warmup", "measure") and record.get("total"):
        return f"{record['phase']} {record['step']}/{record['total']}"
    return record["phase"]


def describe(name: str, record: Optional[dict], exit_code: Optional[int]) -> str:
    """One task's part of the status line, e.g. "worker_0 measure 4/10" or "ps_0 running"."""
    if exit_code is not None and (record is None or record["phase"] != "done" or exit_code != 0):
        return f"{name} exited {exit_code}"
    return f"{name} {phase_text(record)}"


def all_ready(records: Sequence[Optional[dict]], exited: Sequence[bool]) -> bool:
    """The cluster is ready when every measuring task reached "ready" or already exited."""
    return all(progress.reached(r, "ready") or gone for r, gone in zip(records, exited))


class StatusLine:
    def __init__(self, out: TextIO, clock: Callable[[], float] = time.monotonic):
        self._out = out
        self._clock = clock
        self._tty = bool(getattr(out, "isatty", lambda: False)())
        self._width = 0  # characters of the line currently shown on the terminal
        self._shown = ""
        self._last_text: Optional[str] = None
        self._last_print = float("-inf")

    def update(self, elapsed_s: float, parts: Sequence[str]) -> None:
        text = " | ".join(parts)
        line = f"[{elapsed_s:4.0f}s] {text}"
        if self._tty:
            if line != self._shown or not self._width:
                self._out.write("\r" + line.ljust(self._width))
                self._width, self._shown = len(line), line
                self._out.flush()
            return
        now = self._clock()
        if text != self._last_text and now - self._last_print >= PRINT_INTERVAL_S:
            self._out.write(line + "\n")
            self._out.flush()
            self._last_text, self._last_print = text, now

    def message(self, text: str) -> None:
        """Prints a line of its own, moving off a status line shown on the terminal first."""
        self.end()
        self._out.write(text + "\n")
        self._out.flush()

    def end(self) -> None:
        if self._tty and self._width:
            self._out.write("\n")
            self._width = 0
