"""The one step axis every TensorBoard series of a run shares: milliseconds since the run began.

Step times (perf/*, written by the tasks) and system samples (sys/*, host/*, written by the
launcher's monitor) come from different processes at different rates; a sample index or a step
index would put them on unrelated axes. Both use the same origin, the time the run directory's
config.json was written, so TensorBoard's STEP axis shows a sys sample under the step it was
taken in (wall_time stays the absolute time for the WALL axis).
"""
from __future__ import annotations

import os

CONFIG_FILE = "config.json"


def origin(run_path: str) -> float:
    """When the run began (config.json is written once, before any task starts)."""
    for name in (CONFIG_FILE, ""):
        try:
            return os.stat(os.path.join(run_path, name)).st_mtime
        except OSError:
            continue
    return 0.0


def step_ms(run_origin: float, wall_time: float) -> int:
    """The shared TensorBoard step of an event at `wall_time`."""
    return max(0, int(round((wall_time - run_origin) * 1000.0)))
