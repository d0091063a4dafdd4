"""Sampling on a fixed grid, shared by the system monitor and the link monitor: samples every
`interval` seconds from the start, so that a slow sample delays the next one but never shifts
the ones after it (and a sample late by more than an interval is taken at once, not twice)."""
from __future__ import annotations

import threading
import time
from typing import Callable


def every(interval: float, stop: threading.Event, sample: Callable[[], None]) -> None:
    """Calls sample() one interval from now, then on the same grid, until `stop` is set."""
    deadline = time.monotonic()
    while True:
        deadline = max(deadline + interval, time.monotonic())
        if stop.wait(deadline - time.monotonic()):
            return
        sample()
