"""Supervision shared by every launcher: start a plan's units, watch them, end the run.

Each unit runs in a process group of its own, logs to tasks/<name>.log and reports progress
through tasks/<name>.progress (tfbench.loop.progress). supervise() watches exit codes and progress,
shows a status line and says when every measuring task is ready; it ends the run on the first
failure, a stall (watchdog), the deadline or SIGINT / SIGTERM, stopping every process it started
and those started (cluster.supervision: teardown; outcome merges the records).
"""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Protocol, TextIO, Tuple

import psutil

from cluster.faults.injector import FaultInjector
from cluster.faults.straggler import OnceReady
from cluster.launchers.base import HOROVOD_GROUP, Launcher, Unit
from cluster.plan.spec import ClusterPlan, write_plan
from cluster.supervision import scratch, teardown
from cluster.supervision.outcome import Ending, LaunchResult, RecordHook, read_log, report, stop_monitor, told
from cluster.supervision.signals import CaughtSignals, signal_name
from cluster.supervision.status import StatusLine, all_ready, describe, phase_text
from tfbench.config import RunConfig, faults as faults_lib  # noqa: I001
from tfbench.loop import progress
from tfbench.results import records
from tfbench.results.rundir import RunDir

MAX_ATTEMPTS = 3  # starts of the whole cluster when a task cannot bind its port
FAILURE_GRACE_S = 3.0  # SIGTERM -> SIGKILL on failure; with KILL_WAIT_S well under 10 s
SERVICE_GRACE_S = 5.0  # SIGTERM -> SIGKILL for service tasks after a successful run
KILL_WAIT_S = 2.0
POLL_S = 0.2
SNAPSHOT_EVERY_S = 1.0  # how often descendants of the started processes are recorded
BIND_FAILURE = re.compile(
    r"address already in use|EADDRINUSE|could not start grpc server|failed to add port", re.IGNORECASE)


class Monitor(Protocol):
    """What supervision needs from a resource monitor. add() may be called again for a name
    with a new pid: after a restart, or when a task reports a pid of its own (Horovod ranks)."""

    def add(self, task_name: str, pid: int) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> dict: ...


def supervise(launcher: Launcher, plan: ClusterPlan, run: RunDir, config: RunConfig, *,
              monitor_factory: Optional[Callable[[RunDir, ClusterPlan, RunConfig], Monitor]] = None,
              record_hooks: List[RecordHook] = (), out: Optional[TextIO] = None) -> LaunchResult:
    """Runs the plan to completion or failure; no process of the run is left when it returns,
    and launcher.cleanup() has run. The run's results are appended to results.jsonl: the
    cluster record on success (extended by record_hooks), a "failed" record otherwise."""
    out = out or sys.stdout
    status = StatusLine(out)
    for warning in plan.warnings:
        status.message(f"tfbench: warning: {warning}")
    started = time.monotonic()
    monitor, fault_record = None, {}
    first_record = len(records.read(run.results))
    with CaughtSignals() as caught:
        try:
            scratch.open_run(run)
            ending = _set_up(launcher, plan)
            if not isinstance(ending, Ending):
                plan = ending
                write_plan(run, plan)  # the launcher's own plan (emulated hosts: their addresses)
                monitor = monitor_factory(run, plan, config) if monitor_factory else None
                ending, first_record, attempt = _run_attempts(plan, run, config, launcher, monitor, caught, status)
                if attempt.faults is not None:
                    fault_record = attempt.faults.record()
        finally:
            status.end()
            resources = stop_monitor(monitor, status)
            _cleanup(launcher, status)
            scratch.close_run(run)  # every process of the run is gone by now
    extra = {"resources": resources, **launcher.record(), **fault_record}
    return report(ending, first_record, run, config, extra, time.monotonic() - started, status, record_hooks)


def _set_up(launcher: Launcher, plan: ClusterPlan):
    """The launcher's plan, or the failed ending when it cannot set the run up."""
    try:
        return launcher.setup(plan)
    except Exception as e:  # noqa: BLE001 - one line naming the launcher; cleanup still runs
        return Ending("failed", None, f"{launcher.name} launcher could not set up the run: {type(e).__name__}: {e}")


def _cleanup(launcher: Launcher, status: StatusLine) -> None:
    try:
        launcher.cleanup()
    except Exception as e:  # noqa: BLE001 - reported; the stale-run sweep removes what is left
        status.message(f"tfbench: warning: {launcher.name} launcher cleanup failed: {type(e).__name__}: {e}")


def _run_attempts(plan, run, config, launcher, monitor, caught, status) -> Tuple[Ending, int, "_Attempt"]:
    """Starts the cluster up to MAX_ATTEMPTS times while tasks fail to bind their ports.

    Returns the final attempt's ending, how many records results.jsonl held before it (only that
    attempt's task records count) and the attempt itself."""
    deadline = time.monotonic() + config.deadline if config.deadline > 0 else None
    faults = FaultInjector(faults_lib.parse(config.fault), config, run.path, status.message) if config.fault else None
    attempt, starts = 1, 0
    while True:
        plan = launcher.free_ports(plan, status.message)
        write_plan(run, plan)  # the tasks of this attempt read it
        first_record = len(records.read(run.results))
        started = _Attempt(plan, run, config, launcher, monitor, caught, status, deadline, faults)
        ending = started.run(starts == 0)
        starts += 1
        if ending.kind == "restart":  # a fault the run recovers from by starting every task again
            faults.cluster_restarted(ending.failed_task)
            continue
        if ending.kind != "retry":
            return ending, first_record, started
        if attempt == MAX_ATTEMPTS:
            ending.kind, ending.reason = "failed", f"{ending.reason} ({MAX_ATTEMPTS} attempts)"
            return ending, first_record, started
        old = plan.task(ending.failed_task).port
        plan = launcher.rebind(plan, [ending.failed_task])
        attempt += 1
        status.message(f"tfbench: {ending.failed_task} could not bind port {old}; restarting all tasks with "
                       f"port {plan.task(ending.failed_task).port} (attempt {attempt} of {MAX_ATTEMPTS})")


# ---- one attempt ----------------------------------------------------------------------------

@dataclasses.dataclass
class _Process:
    unit: Unit
    popen: subprocess.Popen
    log_offset: int


class _Attempt:
    """One start of every process of the plan, watched until the run ends, then torn down."""

    def __init__(self, plan, run, config, launcher, monitor, caught, status, deadline, faults=None):
        self.plan, self.run_dir, self.config = plan, run, config
        self.launcher, self.monitor, self.caught, self.status = launcher, monitor, caught, status
        self.deadline = deadline
        self.processes: List[_Process] = []
        self.measuring = [t.name for t in plan.tasks if t.measures]
        self.watched = [t.name for t in plan.tasks if t.measures and not t.service]
        self.progress: Dict[str, Optional[dict]] = {}
        self.changed_at: Dict[str, float] = {}
        self.gone_at: Dict[str, float] = {}  # tasks whose reported process ended before "done"
        self.monitored: Dict[str, int] = {}
        self.others: Dict[psutil.Process, None] = {}
        self.ready = False
        self.started_at = time.monotonic()
        self.stragglers: List[OnceReady] = []
        self.faults: Optional[FaultInjector] = faults  # shared by the attempts: each fault applies once

    def run(self, first: bool) -> Ending:
        """Service tasks still serving after a successful run get the longer grace period."""
        ending: Optional[Ending] = None
        try:
            ending = self._launch()
            if ending is None:
                if first and self.monitor is not None:
                    self.monitor.start()
                ending = self._watch()
        finally:
            self.status.end()
            self._teardown(SERVICE_GRACE_S if ending is not None and ending.kind == "ok" else FAILURE_GRACE_S)
        return ending

    # -- starting
    def _launch(self) -> Optional[Ending]:
        for spec in self.plan.tasks:
            progress.clear(self.run_dir.path, spec.name)
        self.started_at = time.monotonic()
        for unit in self.launcher.units(self.plan):
            try:
                self.processes.append(_start(unit))
            except OSError as e:
                return Ending("failed", unit.name, f"could not start {unit.name}: {e}")
            self._pin(self.processes[-1])
            self._monitor(unit.name, self.processes[-1].popen.pid)
            if unit.name == self.config.straggler_task:  # its own session: the pid is the group
                self.stragglers.append(OnceReady(unit.name, self.processes[-1].popen.pid, self.config, self.measuring))
        return None

    def _pin(self, process: _Process) -> None:
        if not process.unit.cores:
            return
        try:
            os.sched_setaffinity(process.popen.pid, process.unit.cores)
        except ProcessLookupError:
            pass  # already exited; the exit code tells why
        except OSError as e:
            self.status.message(f"tfbench: warning: could not pin {process.unit.name} to cores "
                                f"{list(process.unit.cores)}: {e}")

    def _monitor(self, name: str, pid: int) -> None:
        if self.monitor is not None and self.monitored.get(name) != pid:
            self.monitor.add(name, pid)
        self.monitored[name] = pid

    # -- watching
    def _watch(self) -> Ending:
        last_snapshot = 0.0
        while True:
            now = time.monotonic()
            if now - last_snapshot >= SNAPSHOT_EVERY_S:
                self.others.update(dict.fromkeys(teardown.descendants(p.popen.pid for p in self.processes)))
                last_snapshot = now
            ending = self._check(now)
            if ending is not None:
                return ending
            self._show(now)
            time.sleep(POLL_S)

    def _check(self, now: float) -> Optional[Ending]:
        if self.caught.name:
            return Ending("failed", None, f"interrupted by {self.caught.name}")
        self._read_progress(now)
        for straggler in self.stragglers:
            straggler.poll(progress.reached(self.progress.get(straggler.task), "ready"))
        if self.faults is not None:
            self.faults.tick(self.progress, self._fault_target)
            self.faults.watch_recovery()
        ending = self._exits()
        if ending is not None and self.faults is not None:
            self._read_progress(now)
            self.faults.watch_recovery()  # a rank that rejoined since the last poll, seen in its last record
        if ending is None and self.deadline is not None and now >= self.deadline:
            ending = Ending("failed", None, f"deadline of {self.config.deadline:g} s reached")
        return ending or self._stall(now)

    def _read_progress(self, now: float) -> None:
        for name in self.measuring:
            record = progress.read_progress(self.run_dir.path, name)
            before = self.progress.get(name)
            if record is not None and (before is None or _signature(record) != _signature(before)):
                self.changed_at[name] = now
            self.progress[name] = record
            if record is not None and record.get("pid"):
                self._monitor(name, int(record["pid"]))
                if name not in self.gone_at and record["phase"] != "done" and not teardown.pid_alive(int(record["pid"])):
                    self.gone_at[name] = now

    def _fault_target(self, name: str) -> Tuple[Optional[int], bool]:
        """(pid, whole group) of a task: its unit's process group when the unit is the task alone."""
        process = self._process_of(name)
        if process.unit.name == name:
            return process.popen.pid, True
        record = progress.read_progress(self.run_dir.path, name) or {}
        return record.get("pid"), False

    def _restart(self, p: _Process) -> Optional[Ending]:
        """The same unit started again (a killed parameter-server worker: same address)."""
        try:
            restarted = _start(p.unit)
        except OSError as e:
            return Ending("failed", p.unit.name, f"could not restart {p.unit.name} after its fault: {e}")
        self.processes[self.processes.index(p)] = restarted
        self._pin(restarted)
        self._monitor(p.unit.name, restarted.popen.pid)
        self.faults.restarted(p.unit.name, restarted.popen.pid)
        return None

    def _exits(self) -> Optional[Ending]:
        for p in list(self.processes):
            code = p.popen.poll()
            if code is None:
                continue
            killed = self.faults.killed_in(p.unit.tasks or (p.unit.name,)) if self.faults is not None else None
            if code != 0 and killed and self.faults.restarts_cluster(killed):
                return Ending("restart", killed, f"{killed} killed by --fault: every task restarts from the last "
                                                 "checkpoint")
            if code != 0 and self.faults is not None and self.faults.restarts(p.unit.name):
                failed = self._restart(p)
                if failed:
                    return failed
                continue
            if code != 0 and p.unit.tasks and self._tasks_done(p.unit):
                continue  # its servers ended after every finishing task was done
            if code != 0 and p.unit.tasks:  # a group: name the task killed by --fault, else the one not done
                name = killed or self._laggard(p.unit.tasks)
                cause = self.faults.explain(name) if killed else ""
                why = f"{p.unit.name} exited with code {code}{signal_name(code)} before {name} was done{cause}"
                return told(Ending("failed", name, why + self.launcher.explain(), self.run_dir.task_log(name)), killed)
            if code != 0:
                kind = "retry" if self._bind_failure(p) else "failed"
                cause = self.faults.explain(p.unit.name) if self.faults is not None else ""
                return told(Ending(kind, p.unit.name, f"{p.unit.name} exited with code {code}{signal_name(code)}"
                                   f"{cause}", p.unit.log, p.log_offset), kind == "retry" or cause)
            if p.unit.service:
                return Ending("failed", p.unit.name, f"{p.unit.name} exited before the run finished; it should "
                               f"serve until stopped", p.unit.log, p.log_offset)
        finishing = [p for p in self.processes if not p.unit.service]
        if finishing and all(p.popen.returncode == 0 or self._tasks_done(p.unit) for p in finishing):
            return Ending("ok")
        return None

    def _tasks_done(self, unit: Unit) -> bool:
        """A group unit with servers whose finishing tasks are all done: the servers never end by
        themselves, teardown stops them (a group without servers ends by itself)."""
        watched = [n for n in unit.tasks if n in self.watched]
        servers = any(t.service for t in self.plan.tasks if t.name in unit.tasks)
        return servers and bool(watched) and all(progress.reached(self.progress.get(n), "done") for n in watched)

    def _laggard(self, names) -> str:
        """Of a group's tasks, the one whose process was seen to end first before it was done; else (none
        seen, or several at once, e.g. tasks on other nodes) the finishing one furthest behind, else the first."""
        gone = [n for n in names if n in self.gone_at]
        first = [n for n in gone if self.gone_at[n] == min(self.gone_at[g] for g in gone)]
        if len(first) == 1:
            return first[0]
        behind = [n for n in (first or names)
                  if n in self.watched and not progress.reached(self.progress.get(n), "done")]
        return min(behind, key=lambda n: progress.phase_rank(self.progress.get(n))) if behind else names[0]

    def _bind_failure(self, p: _Process) -> bool:
        """A task that exited before it was ready because its port was taken."""
        spec = p.unit.port_task
        if spec is None or progress.reached(self.progress.get(spec.name), "ready"):
            return False
        return bool(BIND_FAILURE.search(read_log(p.unit.log, p.log_offset)))

    def _stall(self, now: float) -> Optional[Ending]:
        """No measuring task's progress changed for stall_timeout seconds (the cluster as a
        whole is stuck); names the running task that has been quiet longest, or else a process
        that should finish but does not (an evaluator, horovodrun after its ranks are done)."""
        last_change = max([self.started_at, *self.changed_at.values()])
        if now - last_change < self.config.stall_timeout:
            return None
        running = [n for n in self.watched if not self._finished(n)] or [
            p.unit.name for p in self.processes if not p.unit.service and p.popen.returncode is None]
        if not running:
            return None
        name = min(running, key=lambda n: self.changed_at.get(n, self.started_at))
        log = self.run_dir.task_log(name)
        offset = next((p.log_offset for p in self.processes if p.unit.name == name), 0)
        record = self.progress.get(name)
        last = f"last reported {phase_text(record)}" if record else "reported no progress"
        return Ending("failed", name, f"stall timeout: no step progress for {self.config.stall_timeout:g} s; "
                       f"{name} {last}", log, offset)

    def _finished(self, name: str) -> bool:
        process = self._process_of(name)
        if process.unit.name == HOROVOD_GROUP or process.unit.tasks:
            record = self.progress.get(name)
            return record is not None and record["phase"] == "done"
        return process.popen.returncode is not None

    def _process_of(self, name: str) -> _Process:
        for p in self.processes:
            if p.unit.name in (name, HOROVOD_GROUP) or name in p.unit.tasks:
                return p
        raise KeyError(name)

    def _show(self, now: float) -> None:
        codes = {t.name: self._process_of(t.name).popen.returncode for t in self.plan.tasks}
        parts = [describe(name, self._shown_progress(name), code) for name, code in codes.items()]
        self.status.update(now - self.started_at, parts)
        if not self.ready and all_ready([self.progress.get(n) for n in self.measuring],
                                        [codes[n] is not None for n in self.measuring]):
            self.ready = True
            self.status.message(f"tfbench: all {len(self.measuring)} measuring tasks ready after "
                                f"{now - self.started_at:.1f} s")

    def _shown_progress(self, name: str) -> Optional[dict]:
        """A measuring task that has not reported yet is starting; other tasks are just running."""
        record = self.progress.get(name)
        return record or ({"phase": "starting"} if name in self.measuring else None)

    # -- stopping
    def _teardown(self, grace: float) -> None:
        for straggler in self.stragglers:  # continued first: a stopped task cannot exit on SIGTERM
            straggler.stop()
        if self.faults is not None:
            self.faults.release()
        popens = [p.popen for p in self.processes]
        self.others.update(dict.fromkeys(teardown.descendants(p.pid for p in popens)))
        others = [*self.others, *teardown.processes_of_run(self.run_dir.path)]
        if not teardown.stop(popens, others, grace, KILL_WAIT_S):
            left = sorted({p.pid for p in others if p.is_running()} | {p.pid for p in popens if p.returncode is None})
            self.status.message(f"tfbench: warning: processes of the run still running after SIGKILL: {left}")


def _start(unit: Unit) -> _Process:
    os.makedirs(os.path.dirname(unit.log), exist_ok=True)
    with open(unit.log, "ab") as log:
        offset = log.tell()
        popen = subprocess.Popen(list(unit.command), stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, env=unit.env, start_new_session=True)
    return _Process(unit, popen, offset)


def _signature(record: dict) -> Tuple[str, int]:
    return record["phase"], record.get("step", 0)
