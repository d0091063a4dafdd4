"""The end of a run: the monitor's summary, the cluster record merged from the tasks' records,
and the failure message with the tail of the failed task's log.

Shared by every launcher through cluster.launchers.supervise; results already written are never touched,
only appended to.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
from typing import Callable, List, Optional

from cluster.faults import recovery, straggler
from cluster.supervision.status import StatusLine
from tfbench.config import RunConfig
from tfbench.framework import error_line
from tfbench.results import records
from tfbench.results.rundir import RunDir

LOG_TAIL_LINES = 20
FATAL_ERROR = "Fatal Python error"  # how faulthandler's report of a fatal signal begins

# Extra facts a launcher or monitor adds to the cluster record once the window is known.
RecordHook = Callable[[RunDir, dict], dict]


@dataclasses.dataclass
class LaunchResult:
    ok: bool
    exit_code: int  # 0 ok, 1 failed / interrupted / timed out
    failed_task: Optional[str]
    reason: str
    cluster_record: Optional[dict]  # the cluster record appended to results.jsonl


@dataclasses.dataclass
class Ending:
    """How one attempt ended: "ok", "failed", or "retry" (a task could not bind its port)."""

    kind: str
    failed_task: Optional[str] = None
    reason: str = ""
    log: Optional[str] = None  # log to show the tail of
    log_offset: int = 0


def told(ending: Ending, keep: object = False) -> Ending:
    """The ending with the failed task's own word for its failure as the reason ('worker_0:
    DataLossError: corrupted record at 0'), read from its log (tfbench.framework.error_line), where
    the log says it and `keep` is false (a fault that killed it, a port taken: the launcher's
    reason stands); the log itself stays in the run directory, and its tail is printed. horovodrun
    names the first rank that failed: that rank's log (tasks/worker_<rank>.log) says why."""
    if keep or ending.log is None:
        return ending
    text = read_log(ending.log, ending.log_offset)
    rank = error_line.first_rank(text)
    if rank is not None:
        name = f"worker_{rank}"
        log = os.path.join(os.path.dirname(ending.log), f"{name}.log")
        said = error_line.told(read_log(log), name)
        if said:
            return dataclasses.replace(ending, failed_task=name, reason=f"{name}: {said}", log=log, log_offset=0)
    said = error_line.told(text, ending.failed_task)
    return dataclasses.replace(ending, reason=f"{ending.failed_task}: {said}") if said else ending


def stop_monitor(monitor, status: StatusLine) -> dict:
    """The monitor's summary; a failing monitor costs the resource numbers, never the run."""
    if monitor is None:
        return {}
    try:
        return dict(monitor.stop() or {})
    except Exception as e:  # noqa: BLE001 - any monitor error is reported and the run kept
        status.message(f"tfbench: warning: the monitor failed to stop: {type(e).__name__}: {e}")
        return {}


def report(ending: Ending, first_record: int, run: RunDir, config: RunConfig, extra: dict,
           elapsed: float, status: StatusLine, hooks: List[RecordHook] = ()) -> LaunchResult:
    """Appends the cluster record (or a "failed" one) and says how the run ended."""
    extra = {"config": config.to_dict(), "strategy": config.strategy, "num_workers": config.num_workers,
             "num_ps": config.effective_num_ps, **extra}
    if config.straggler:
        extra["straggler"] = straggler.describe(config.straggler_task, config.straggler_slowdown)
    if ending.kind == "ok":
        task_records = [r for r in records.read(run.results)[first_record:] if r.get("kind") == "task"]
        try:
            record = records.cluster_record(run.run_id, task_records, extra=extra)
        except ValueError as e:
            ending = Ending("failed", None, f"every task exited 0 but no results were recorded: {e}")
        else:
            if record.get("faults"):
                record["recovery"] = recovery.analyse(record["faults"], task_records, record.get("num_workers"))
            for hook in hooks:
                record.update(_safe_hook(hook, run, record, status))
            records.append(run.results, record)
            reason = f"all tasks finished in {elapsed:.1f} s"
            status.message(f"tfbench: {reason}")
            return LaunchResult(True, 0, None, reason, record)
    record = {"kind": "cluster", "schema_version": records.SCHEMA_VERSION, "run_id": run.run_id, "status": "failed",
              "failed_task": ending.failed_task,
              "reason": ending.reason, **extra}
    records.append(run.results, record)
    print_failure(ending, status)
    return LaunchResult(False, 1, ending.failed_task, ending.reason, record)


def _safe_hook(hook: RecordHook, run: RunDir, record: dict, status: StatusLine) -> dict:
    try:
        return dict(hook(run, record) or {})
    except Exception as e:  # noqa: BLE001 - a missing extra costs that figure, never the record
        status.message(f"tfbench: warning: {getattr(hook, '__name__', 'record hook')} failed: {type(e).__name__}: {e}")
        return {}


def print_failure(ending: Ending, status: StatusLine) -> None:
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


def read_log(path: str, offset: int = 0, limit: int = 256 * 1024) -> str:
    """The log written since `offset` (this attempt's part), at most its last `limit` bytes."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(offset, size - limit))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def log_tail(path: str, offset: int = 0, lines: int = LOG_TAIL_LINES) -> List[str]:
    """The log's last `lines`; for a task that crashed (a fatal signal, which tfbench.app.task's
    faulthandler reports), the crash's first line and the crashing thread's Python stack instead:
    the other threads' stacks come after it and would push it out of the tail."""
    text = read_log(path, offset).splitlines()
    crash = max((i for i, line in enumerate(text) if line.startswith(FATAL_ERROR)), default=None)
    if crash is None:
        return text[-lines:]
    report = text[crash:]
    current = next((i for i, line in enumerate(report) if line.startswith("Current thread")), None)
    if current is None:
        return report[:lines]
    stack = list(itertools.takewhile(str.strip, report[current:]))
    return [report[0], *stack][:lines]
