"""Stopping a run's processes: every process group the launcher started, and every process
those started elsewhere (horovodrun puts its ranks in sessions of their own).

Escalation is SIGTERM, a grace period, then SIGKILL, so that a task can flush its logs but a
hung one cannot keep the run alive.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Iterable, List, Sequence

import psutil

RUN_DIR_VARIABLE = "TFBENCH_RUN_DIR"
_POLL_S = 0.05


def group_alive(pgid: int) -> bool:
    """True while any process of the group exists (zombies included until reaped)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def descendants(pids: Iterable[int]) -> List[psutil.Process]:
    """Living descendants of the given processes, remembered so that they can be killed even
    after their parent has died and they were re-parented."""
    found: List[psutil.Process] = []
    for pid in pids:
        try:
            found.extend(psutil.Process(pid).children(recursive=True))
        except psutil.Error:
            continue
    return found


def processes_of_run(run_path: str) -> List[psutil.Process]:
    """Processes of this user whose environment names the run directory, wherever they are in
    the process tree; the run directory is unique, so nothing else matches."""
    own = os.getpid()
    found = []
    for proc in psutil.process_iter():
        if proc.pid == own:
            continue
        try:
            if proc.environ().get(RUN_DIR_VARIABLE) == run_path:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal_all(popens: Sequence[subprocess.Popen], others: Sequence[psutil.Process], sig: int) -> None:
    for p in popens:
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for proc in others:
        try:
            proc.send_signal(sig)  # psutil refuses if the pid now belongs to another process
        except psutil.Error:
            pass


def _all_gone(popens: Sequence[subprocess.Popen], others: Sequence[psutil.Process]) -> bool:
    for p in popens:
        p.poll()
    return (all(p.returncode is not None and not group_alive(p.pid) for p in popens)
            and not any(_alive(proc) for proc in others))


def _wait_gone(popens, others, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while True:
        if _all_gone(popens, others):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(_POLL_S)


def stop(popens: Sequence[subprocess.Popen], others: Sequence[psutil.Process] = (),
         grace: float = 3.0, kill_wait: float = 2.0) -> bool:
    """SIGTERM to each Popen's process group and to `others`, SIGKILL to what is left after
    `grace` seconds. Returns True once everything is gone (at most grace + kill_wait seconds)."""
    others = _unique(others)
    _signal_all(popens, others, signal.SIGTERM)
    if _wait_gone(popens, others, grace):
        return True
    _signal_all(popens, others, signal.SIGKILL)
    return _wait_gone(popens, others, kill_wait)


def _unique(procs: Iterable[psutil.Process]) -> List[psutil.Process]:
    """psutil compares processes by pid and start time, so a reused pid stays a distinct entry."""
    return list(dict.fromkeys(procs))


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
