"""Local launcher: runs a ClusterPlan's processes on this machine and always cleans up after them.

Each task runs in a process group of its own, logs to tasks/<name>.log and reports progress
through tasks/<name>.progress (cluster.progress). The launcher watches exit codes and progress,
shows a status line, and ends the run on the first failure, a stall, the deadline or SIGINT /
SIGTERM, stopping every process it started and every process those started. Horovod plans run
as one horovodrun process whose ranks report progress under the ranks' task names.
"""
from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional, Protocol, TextIO, Tuple

import portpicker
import psutil

from cluster import progress, teardown
from cluster.ports import is_local, port_is_free
from cluster.spec import ClusterPlan, TaskSpec
from cluster.status import StatusLine, all_ready, describe, phase_text
from cluster.topology import with_new_ports
from tfbench import records
from tfbench.config import RunConfig
from tfbench.rundir import RunDir

MAX_ATTEMPTS = 3  # starts of the whole cluster when a task cannot bind its port
FAILURE_GRACE_S = 3.0  # SIGTERM -> SIGKILL on failure; with KILL_WAIT_S well under 10 s
SERVICE_GRACE_S = 5.0  # SIGTERM -> SIGKILL for service tasks after a successful run
KILL_WAIT_S = 2.0
POLL_S = 0.2
SNAPSHOT_EVERY_S = 1.0  # how often descendants of the started processes are recorded
LOG_TAIL_LINES = 20
BIND_FAILURE = re.compile(
    r"address already in use|EADDRINUSE|could not start grpc server|failed to add port", re.IGNORECASE)
HOROVOD_GROUP = "horovodrun"
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass
class LaunchResult:
    ok: bool
    exit_code: int  # 0 ok, 1 failed / interrupted / timed out
    failed_task: Optional[str]
    reason: str
    cluster_record: Optional[dict]  # the cluster record appended to results.jsonl


class Monitor(Protocol):
    """What the launcher needs from a resource monitor. add() may be called again for a name
    with a new pid: after a restart, or when a task reports a pid of its own (Horovod ranks)."""

    def add(self, task_name: str, pid: int) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> dict: ...


@dataclasses.dataclass(frozen=True)
class Unit:
    """One process the launcher starts: a task, or horovodrun standing for all Horovod ranks."""

    name: str
    command: Tuple[str, ...]
    env: Dict[str, str]
    log: str
    cores: Tuple[int, ...] = ()
    service: bool = False
    port_task: Optional[TaskSpec] = None  # the task whose port this process binds


@dataclasses.dataclass
class _Ending:
    """How one attempt ended: "ok", "failed", or "retry" (a task could not bind its port)."""

    kind: str
    failed_task: Optional[str] = None
    reason: str = ""
    log: Optional[str] = None  # log to show the tail of
    log_offset: int = 0


def run(plan: ClusterPlan, run: RunDir, config: RunConfig, *,
        command_for: Optional[Callable[[TaskSpec], List[str]]] = None,
        group_command: Optional[Callable[[ClusterPlan], List[str]]] = None,
        monitor_factory: Optional[Callable[[RunDir, ClusterPlan, RunConfig], Monitor]] = None,
        out: Optional[TextIO] = None) -> LaunchResult:
    """Runs the plan to completion or failure; no process of the run is left when it returns.

    command_for(spec) gives one task's command (default: python -m tfbench.task); Horovod plans
    use group_command(plan) instead (default: horovodrun --gloo). The run's results are
    appended to results.jsonl: the cluster record on success, a "failed" record otherwise.
    """
    out = out or sys.stdout
    status = StatusLine(out)
    for warning in plan.warnings:
        status.message(f"tfbench: warning: {warning}")
    commands = _Commands(run, command_for or default_command(run), group_command or default_group_command(run))
    started = time.monotonic()
    monitor = monitor_factory(run, plan, config) if monitor_factory else None
    with _CaughtSignals() as caught:
        try:
            ending, first_record = _run_attempts(plan, run, config, commands, monitor, caught, status)
        finally:
            status.end()
            resources = _stop_monitor(monitor, status)
    return _report(ending, first_record, run, config, resources, time.monotonic() - started, status)


def default_command(run: RunDir) -> Callable[[TaskSpec], List[str]]:
    return lambda spec: [sys.executable, "-m", "tfbench.task", "--run_dir", run.path, "--task", spec.name]


def default_group_command(run: RunDir) -> Callable[[ClusterPlan], List[str]]:
    """horovodrun from the same environment as this Python, starting every rank's task."""
    horovodrun = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    return lambda plan: [horovodrun, "--gloo", "-np", str(len(plan.workers)), "-H", plan.horovod_hosts,
                         sys.executable, "-m", "tfbench.task", "--run_dir", run.path, "--task", "horovod"]


@dataclasses.dataclass(frozen=True)
class _Commands:
    run: RunDir
    task: Callable[[TaskSpec], List[str]]
    group: Callable[[ClusterPlan], List[str]]

    def units(self, plan: ClusterPlan) -> List[Unit]:
        if plan.strategy == "horovod":
            env: Dict[str, str] = {}
            for spec in plan.tasks:
                env.update(spec.full_env())
            cores = tuple(sorted({c for spec in plan.tasks for c in spec.cores}))
            return [Unit(HOROVOD_GROUP, tuple(self.group(plan)), self._env(HOROVOD_GROUP, env),
                         self.run.task_log(HOROVOD_GROUP), cores)]
        return [Unit(spec.name, tuple(self.task(spec)), self._env(spec.name, spec.full_env()),
                     self.run.task_log(spec.name), spec.cores, spec.service,
                     spec if spec.port and is_local(spec.host) else None)
                for spec in plan.tasks]

    def _env(self, name: str, task_env: Dict[str, str]) -> Dict[str, str]:
        """The launcher's environment plus the task's; logs unbuffered so that a killed task's
        last lines are in its log, and this checkout importable whatever the working directory."""
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH")) if p)
        env.update(task_env)
        env[teardown.RUN_DIR_VARIABLE] = self.run.path
        env["TFBENCH_TASK"] = "horovod" if name == HOROVOD_GROUP else name
        return env


# ---- attempts and ports ---------------------------------------------------------------------

def _run_attempts(plan, run, config, commands, monitor, caught, status) -> Tuple[_Ending, int]:
    """Starts the cluster up to MAX_ATTEMPTS times while tasks fail to bind their ports.

    Returns the final attempt's ending and how many records results.jsonl held before it, so
    that only that attempt's task records count."""
    ports = _FreshPorts(plan)
    deadline = time.monotonic() + config.deadline if config.deadline > 0 else None
    attempt = 1
    while True:
        plan = _with_free_ports(plan, run, ports, status)
        first_record = len(records.read(run.results))
        ending = _Attempt(plan, run, config, commands, monitor, caught, status, deadline).run(attempt == 1)
        if ending.kind != "retry":
            return ending, first_record
        if attempt == MAX_ATTEMPTS:
            ending.kind, ending.reason = "failed", f"{ending.reason} ({MAX_ATTEMPTS} attempts)"
            return ending, first_record
        old = plan.task(ending.failed_task).port
        plan = _replace_ports(plan, [ending.failed_task], ports, run)
        attempt += 1
        status.message(f"tfbench: {ending.failed_task} could not bind port {old}; restarting all tasks with "
                       f"port {plan.task(ending.failed_task).port} (attempt {attempt} of {MAX_ATTEMPTS})")


class _FreshPorts:
    """Free local ports that no task of the plan uses yet (a with_new_ports allocator)."""

    def __init__(self, plan: ClusterPlan):
        self._used = {t.port for t in plan.tasks if t.port}

    def port_for(self, host: str) -> int:
        while True:
            port = portpicker.pick_unused_port()
            if port not in self._used and port_is_free(port):
                self._used.add(port)
                return port


def _taken_ports(plan: ClusterPlan) -> List[str]:
    return [t.name for t in plan.tasks if t.port and is_local(t.host) and not port_is_free(t.port)]


def _with_free_ports(plan, run, ports, status) -> ClusterPlan:
    """The plan with every local port that something else holds replaced (plan.json rewritten)."""
    for _ in range(MAX_ATTEMPTS):
        taken = _taken_ports(plan)
        if not taken:
            break
        new = _replace_ports(plan, taken, ports, run)
        for name in taken:
            status.message(f"tfbench: port {plan.task(name).port} of {name} is taken; using {new.task(name).port}")
        plan = new
    return plan


def _replace_ports(plan, names, ports, run) -> ClusterPlan:
    plan = with_new_ports(plan, names, ports)
    run.write_json("plan.json", plan.to_dict())
    return plan


# ---- one attempt ----------------------------------------------------------------------------

@dataclasses.dataclass
class _Process:
    unit: Unit
    popen: subprocess.Popen
    log_offset: int


class _Attempt:
    """One start of every process of the plan, watched until the run ends, then torn down."""

    def __init__(self, plan, run, config, commands, monitor, caught, status, deadline):
        self.plan, self.run_dir, self.config = plan, run, config
        self.commands, self.monitor, self.caught, self.status = commands, monitor, caught, status
        self.deadline = deadline
        self.processes: List[_Process] = []
        self.measuring = [t.name for t in plan.tasks if t.measures]
        self.watched = [t.name for t in plan.tasks if t.measures and not t.service]
        self.progress: Dict[str, Optional[dict]] = {}
        self.changed_at: Dict[str, float] = {}
        self.monitored: Dict[str, int] = {}
        self.others: Dict[psutil.Process, None] = {}
        self.ready = False
        self.started_at = time.monotonic()

    def run(self, first: bool) -> _Ending:
        """Service tasks still serving after a successful run get the longer grace period."""
        ending: Optional[_Ending] = None
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
    def _launch(self) -> Optional[_Ending]:
        for spec in self.plan.tasks:
            progress.clear(self.run_dir.path, spec.name)
        self.started_at = time.monotonic()
        for unit in self.commands.units(self.plan):
            try:
                self.processes.append(_start(unit))
            except OSError as e:
                return _Ending("failed", unit.name, f"could not start {unit.name}: {e}")
            self._pin(self.processes[-1])
            self._monitor(unit.name, self.processes[-1].popen.pid)
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
    def _watch(self) -> _Ending:
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

    def _check(self, now: float) -> Optional[_Ending]:
        if self.caught.name:
            return _Ending("failed", None, f"interrupted by {self.caught.name}")
        self._read_progress(now)
        ending = self._exits()
        if ending is None and self.deadline is not None and now >= self.deadline:
            ending = _Ending("failed", None, f"deadline of {self.config.deadline:g} s reached")
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

    def _exits(self) -> Optional[_Ending]:
        for p in self.processes:
            code = p.popen.poll()
            if code is None:
                continue
            if code != 0:
                kind = "retry" if self._bind_failure(p) else "failed"
                return _Ending(kind, p.unit.name, f"{p.unit.name} exited with code {code}{_signal_name(code)}",
                               p.unit.log, p.log_offset)
            if p.unit.service:
                return _Ending("failed", p.unit.name, f"{p.unit.name} exited before the run finished; it should "
                               f"serve until stopped", p.unit.log, p.log_offset)
        finishing = [p for p in self.processes if not p.unit.service]
        if finishing and all(p.popen.returncode == 0 for p in finishing):
            return _Ending("ok")
        return None

    def _bind_failure(self, p: _Process) -> bool:
        """A task that exited before it was ready because its port was taken."""
        spec = p.unit.port_task
        if spec is None or progress.reached(self.progress.get(spec.name), "ready"):
            return False
        return bool(BIND_FAILURE.search(_read_log(p.unit.log, p.log_offset)))

    def _stall(self, now: float) -> Optional[_Ending]:
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
        return _Ending("failed", name, f"stall timeout: no step progress for {self.config.stall_timeout:g} s; "
                       f"{name} {last}", log, offset)

    def _finished(self, name: str) -> bool:
        process = self._process_of(name)
        if process.unit.name == HOROVOD_GROUP:
            record = self.progress.get(name)
            return record is not None and record["phase"] == "done"
        return process.popen.returncode is not None

    def _process_of(self, name: str) -> _Process:
        for p in self.processes:
            if p.unit.name in (name, HOROVOD_GROUP):
                return p
        raise KeyError(name)

    def _show(self, now: float) -> None:
        codes = {name: self._exit_code(name) for name in (t.name for t in self.plan.tasks)}
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

    def _exit_code(self, name: str) -> Optional[int]:
        return self._process_of(name).popen.returncode

    # -- stopping
    def _teardown(self, grace: float) -> None:
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


def _signal_name(code: int) -> str:
    if code >= 0:
        return ""
    try:
        return f" ({signal.Signals(-code).name})"
    except ValueError:
        return ""


def _read_log(path: str, offset: int = 0, limit: int = 256 * 1024) -> str:
    """The log written since `offset` (this attempt's part), at most its last `limit` bytes."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(offset, size - limit))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def log_tail(path: str, offset: int = 0, lines: int = LOG_TAIL_LINES) -> List[str]:
    return _read_log(path, offset).splitlines()[-lines:]


# ---- signals, monitor, results --------------------------------------------------------------

class _CaughtSignals:
    """Turns SIGINT / SIGTERM into a flag the watch loop acts on, for the duration of a run.

    Handlers can only be installed from the main thread; elsewhere the caller's handling stays."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.name: Optional[str] = None
        self._previous: Dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        self.name = self.name or signal.Signals(signum).name

    def __enter__(self) -> "_CaughtSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _stop_monitor(monitor, status: StatusLine) -> dict:
    """The monitor's summary; a failing monitor costs the resource numbers, never the run."""
    if monitor is None:
        return {}
    try:
        return dict(monitor.stop() or {})
    except Exception as e:  # noqa: BLE001 - any monitor error is reported and the run kept
        status.message(f"tfbench: warning: the monitor failed to stop: {type(e).__name__}: {e}")
        return {}


def _report(ending: _Ending, first_record: int, run: RunDir, config: RunConfig, resources: dict,
            elapsed: float, status: StatusLine) -> LaunchResult:
    extra = {"config": config.to_dict(), "strategy": config.strategy, "num_workers": config.num_workers,
             "num_ps": config.effective_num_ps, "resources": resources}
    if ending.kind == "ok":
        task_records = [r for r in records.read(run.results)[first_record:] if r.get("kind") == "task"]
        try:
            record = records.cluster_record(run.run_id, task_records, extra=extra)
        except ValueError as e:
            ending = _Ending("failed", None, f"every task exited 0 but no results were recorded: {e}")
        else:
            records.append(run.results, record)
            reason = f"all tasks finished in {elapsed:.1f} s"
            status.message(f"tfbench: {reason}")
            return LaunchResult(True, 0, None, reason, record)
    record = {"kind": "cluster", "run_id": run.run_id, "status": "failed", "failed_task": ending.failed_task,
              "reason": ending.reason, **extra}
    records.append(run.results, record)
    _print_failure(ending, status)
    return LaunchResult(False, 1, ending.failed_task, ending.reason, record)


def _print_failure(ending: _Ending, status: StatusLine) -> None:
    status.message(f"tfbench: run failed: {ending.reason}")
    if ending.log is None:
        return
    tail = log_tail(ending.log, ending.log_offset)
    if not tail:
        status.message(f"tfbench: {ending.log} is empty")
        return
    status.message(f"tfbench: last {len(tail)} lines of {ending.log}:")
    for line in tail:
        status.message(f"    {line}")
