"""The emulated hosts' link counters sampled on their own, where the run's switch is.

A local emulated run's Monitor samples the links next to its tasks (tfbench.monitor.monitor).
On emulated Slurm nodes the tasks are sampled by one monitor per node, inside the nodes, while
the switch namespace is reached from the launcher's machine: this thread samples only the links,
every --monitor_interval, on the run's time axis, writing the same tb/host_h<i>/ link series and
links.jsonl (tfbench.monitor.host_links), so that the cluster record's link_traffic and every
report read them exactly as for a local emulated run.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Optional

from tfbench.monitor import grid
from tfbench.monitor.host_links import HostLinks
from tfbench.results.rundir import RunDir
from tfbench.tensorboard import timeline

log = logging.getLogger(__name__)
JOIN_TIMEOUT_S = 5.0


class LinkMonitor:
    def __init__(self, run: RunDir, interval_s: float):
        self._run = run
        self._interval = float(interval_s)
        self._origin = timeline.origin(run.path)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._links: Optional[HostLinks] = None
        self._summary: Optional[dict] = None

    def start(self) -> None:
        """The first sample (the zero every total counts from), then one per interval."""
        if self._thread is not None:
            return
        self._links = HostLinks.from_run(self._run)
        if self._links is None:
            return
        self._sample(write_events=False)
        self._thread = threading.Thread(target=self._loop, name="tfbench-links", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        grid.every(self._interval, self._stop, lambda: self._sample(write_events=True))

    def _sample(self, write_events: bool) -> None:
        now = time.time()
        try:
            self._links.sample(now, timeline.step_ms(self._origin, now), write_events=write_events)
        except Exception as e:  # noqa: BLE001 - a netlink hiccup costs one sample, never the run
            log.warning("link sample failed: %r", e)

    def stop(self) -> dict:
        """The last sample and {"host_links": whole-run totals per host}; later calls return the same."""
        if self._summary is not None:
            return self._summary
        self._summary = {}
        if self._thread is None:
            return self._summary
        self._stop.set()
        self._thread.join(JOIN_TIMEOUT_S)
        stopped = not self._thread.is_alive()  # else a hung sample still holds the counters
        if stopped:
            self._sample(write_events=False)
        self._summary = {"host_links": self._links.summary()}
        if stopped:
            self._links.close()
        return self._summary
