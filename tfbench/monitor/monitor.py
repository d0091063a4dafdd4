"""The system monitor the launcher runs next to a run's tasks.

A thread, not a process: the launcher stays light and never imports TensorFlow, and a thread
can be joined with a timeout. Each interval it samples every task's process tree (CPU, RSS,
threads), per-process TCP traffic, GPUs when present and the host, then writes events and
monitor.jsonl. Nothing a task process does (exiting, turning zombie, restarting) may stop
the sampling loop; stop() wakes the thread at once and returns within a few seconds even if a
sample hangs, with a summary for the run's cluster record.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, Optional

from tfbench.config import RunConfig
from tfbench.monitor import grid, netstat
from tfbench.monitor.gpu import GpuSampler
from tfbench.monitor.host import HostSampler, machine_cores
from tfbench.monitor.host_links import HostLinks
from tfbench.monitor.netstat import Counts, NetSource
from tfbench.monitor.output import MonitorOutput
from tfbench.monitor.series import HostSeries, TaskSeries, workers_mean
from tfbench.results.rundir import RunDir
from tfbench.tensorboard import timeline

log = logging.getLogger(__name__)
_JOIN_TIMEOUT_S = 5.0


class Monitor:
    def __init__(self, run: RunDir, plan, config: RunConfig,
                 net_source_factory: Callable[[], Optional[NetSource]] = netstat.default_source,
                 gpu_factory: Callable[[], Optional[GpuSampler]] = GpuSampler.create,
                 links_factory: Callable[[RunDir], Optional[HostLinks]] = HostLinks.from_run,
                 host_interfaces: bool = True, tasks_in_namespaces: bool = False):
        """`host_interfaces=False`: the tasks talk inside a network namespace of their own (a
        local run's private one), so this machine's interfaces carry none of their traffic.
        `tasks_in_namespaces`: every task sits on an emulated host (tfbench.config.kinds), whose link
        the link monitor counts, so no socket of theirs is read from here."""
        self._run = run
        self._origin = timeline.origin(run.path)  # events share the tasks' step axis
        self._plan = plan
        self._interval = float(config.monitor_interval)
        self._net_source_factory = net_source_factory
        self._gpu_factory = gpu_factory
        self._links_factory = links_factory  # a Slurm node's monitor has none: the launcher reads the links
        self._tasks: Dict[str, TaskSeries] = {}
        self._host = HostSeries()
        self._lock = threading.Lock()  # guards tasks and samplers between add(), the loop and stop()
        self._stop_lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._output: Optional[MonitorOutput] = None
        self._net: Optional[NetSource] = None
        self._gpu: Optional[GpuSampler] = None
        self._host_sampler: Optional[HostSampler] = None
        self._links: Optional[HostLinks] = None
        # Emulated hosts' links are charted as link/* (tfbench.monitor.host_links), not as this machine's interfaces.
        self._host_interfaces = host_interfaces and not tasks_in_namespaces
        if tasks_in_namespaces:  # emulated hosts: tasks' sockets live in other namespaces, counted per host link
            self._net_source_factory = lambda: None
        self._step = 0
        self._summary: Optional[dict] = None
        self._errors_logged = 0

    # ---- launcher API ---------------------------------------------------------------------
    def add(self, task_name: str, pid: int) -> None:
        """Follows `pid` as task `task_name`; re-adding a task follows its restarted process."""
        with self._lock:
            series = self._tasks.get(task_name)
            if series is None:
                series = self._tasks[task_name] = self._new_series(task_name)
            series.attach(pid)

    def start(self) -> None:
        with self._lock:
            if self._thread is not None or self._stop_event.is_set():
                return
            self._output = MonitorOutput(self._run, self._host_interfaces)
            self._host_sampler = HostSampler(time.time())
            self._net = self._create(self._net_source_factory, "per-task network")
            self._gpu = self._create(self._gpu_factory, "GPU")
            self._links = self._create(lambda: self._links_factory(self._run), "per-host link")
            if self._links is not None:
                self._guard(self._link_sample_without_events)
            self._thread = threading.Thread(target=self._loop, name="tfbench-monitor", daemon=True)
            self._thread.start()

    def _link_sample_without_events(self) -> None:
        """The links' first and last counts (totals run from and to these), on the events' axis."""
        now = time.time()
        self._links.sample(now, timeline.step_ms(self._origin, now), write_events=False)

    def stop(self) -> dict:
        """Stops sampling, flushes and returns the summary; later calls return the same."""
        with self._stop_lock:
            if self._summary is not None:
                return self._summary
            self._stop_event.set()
            thread = self._thread
            if thread is not None:
                thread.join(timeout=_JOIN_TIMEOUT_S)
                if thread.is_alive():
                    log.warning("monitor thread did not stop within %.1f s", _JOIN_TIMEOUT_S)
            locked = self._lock.acquire(timeout=1.0)
            try:
                if thread is not None and not thread.is_alive():
                    self._guard(self._refresh_traffic)
                    if self._links is not None:
                        self._guard(self._link_sample_without_events)
                self._summary = self._summarize()
            finally:
                if locked:
                    self._lock.release()
            self._close()
            return self._summary

    # ---- sampling -------------------------------------------------------------------------
    def _loop(self) -> None:
        """Samples on a fixed grid, first one interval after start() so host rates have a base."""
        grid.every(self._interval, self._stop_event, self._locked_sample)

    def _locked_sample(self) -> None:
        with self._lock:
            self._guard(self._sample)

    def _sample(self) -> None:
        now = time.time()
        sampled = []
        for series in self._tasks.values():
            tree = series.tree.sample(now) if series.tree is not None else None
            if tree is not None:
                sampled.append((series, tree))
        net = self._traffic({pid for _, tree in sampled for pid in tree.pids})
        gpu = self._gpu.sample() if self._gpu is not None else None
        records = [series.record(self._step, now, tree, net, gpu) for series, tree in sampled]
        host = self._host.record(self._step, now, self._host_sampler.sample(now), gpu)
        step = timeline.step_ms(self._origin, now)
        self._output.write(step, now, records, host)
        if self._links is not None:
            self._guard(lambda: self._links.sample(now, step))
        self._step += 1

    def _traffic(self, pids) -> Optional[Dict[int, Counts]]:
        if self._net is None:
            return None
        try:
            return self._net.sample(pids)
        except Exception as e:  # a netlink hiccup must not cost the CPU and memory series
            self._log_error("network sample failed: %s", e)
            return None

    def _refresh_traffic(self) -> None:
        """Brings cumulative traffic up to date at stop, without writing a short-interval sample."""
        pids = {pid for series in self._tasks.values() for pid in series.last_pids}
        net = self._traffic(pids)
        if net is not None:
            for series in self._tasks.values():
                series.take_traffic(series.last_pids, net)

    def _guard(self, fn) -> None:
        try:
            fn()
        except Exception as e:
            self._log_error("monitor sample failed: %r", e)

    def _log_error(self, message: str, *args) -> None:
        self._errors_logged += 1
        (log.warning if self._errors_logged <= 3 else log.debug)(message, *args)

    # ---- helpers --------------------------------------------------------------------------
    def _new_series(self, task_name: str) -> TaskSeries:
        try:
            spec = self._plan.task(task_name)
            role, index, cores = spec.role, spec.index, len(spec.cores)
        except KeyError:
            role, _, index = task_name.rpartition("_")
            role, index, cores = role or task_name, int(index) if index.isdigit() else 0, 0
        return TaskSeries(task_name, role, index, cores or machine_cores())

    @staticmethod
    def _create(factory, what: str):
        try:
            return factory()
        except Exception as e:
            log.warning("%s monitoring unavailable: %s", what, e)
            return None

    def _summarize(self) -> dict:
        tasks = {name: series.summary() for name, series in self._tasks.items()}
        return {
            "interval_s": self._interval,
            "samples": self._step,
            "network_source": type(self._net).__name__ if self._net is not None else None,
            "tasks": tasks,
            "workers_mean": workers_mean([s for s in tasks.values() if s["role"] == "worker"]),
            "host": self._host.summary(),
            **({"host_links": self._links.summary()} if self._links is not None else {}),
        }

    def _close(self) -> None:
        for resource in (self._output, self._net, self._gpu, self._links):
            if resource is not None:
                try:
                    resource.close()
                except Exception as e:
                    log.debug("closing %s: %s", type(resource).__name__, e)


class NullMonitor:
    """Stands in when --nomonitor: same calls, no thread, an empty summary."""

    def add(self, task_name: str, pid: int) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> dict:
        return {}


def monitor_factory(run: RunDir, plan, config: RunConfig):
    return Monitor(run, plan, config) if config.monitor else NullMonitor()
