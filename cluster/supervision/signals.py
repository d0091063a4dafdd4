"""SIGINT / SIGTERM during a run: caught and turned into a flag, so that the launcher's watch loop
ends the run through its normal teardown (every process stopped, results kept)."""
from __future__ import annotations

import signal
import threading
from typing import Dict, Optional


class CaughtSignals:
    """Turns SIGINT / SIGTERM into a flag the watch loop acts on, for the duration of a run.

    Handlers can only be installed from the main thread; elsewhere the caller's handling stays."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.name: Optional[str] = None
        self._previous: Dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        self.name = self.name or signal.Signals(signum).name

    def __enter__(self) -> "CaughtSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def signal_name(code: int) -> str:
    """The signal that ended a process, as ' (SIGKILL)' for exit code -9; '' for a normal exit."""
    if code >= 0:
        return ""
    try:
        return f" ({signal.Signals(-code).name})"
    except ValueError:
        return ""
