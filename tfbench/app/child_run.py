"""One tfbench run started as a child process and stopped with everything it started.

Sweeps and `python -m tfbench --tune` run each point as a fresh `python -m tfbench` (no point
inherits another's threads or memory); this is how they start, wait for and stop it.
"""
from __future__ import annotations

import os
import signal
import subprocess
from typing import List, Optional, Sequence

STOP_WAIT_S = 10.0


def command_flags(config) -> List[str]:
    """The flags that give `config` (a RunConfig): those off RunConfig's defaults."""
    defaults, flags = type(config)().to_dict(), []
    for name, value in config.to_dict().items():
        if value != defaults[name]:
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, list):
                value = ",".join(str(v) for v in value)
            flags.append(f"--{name}={value}")
    return flags


def run_command(argv: Sequence[str], stdout_path: str, stderr_path: str, timeout_s: Optional[float],
                env: Optional[dict] = None) -> Optional[int]:
    """Exit code of `argv`, or None when it ran past `timeout_s` and was stopped.

    The command gets a process group of its own so that stopping it also stops the tasks it
    started; an interrupt of the starter stops it the same way before propagating, and a starter
    killed outright (SIGKILL) has the kernel send it SIGTERM, on which tfbench tears its run down.
    """
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, preexec_fn=_terminate_with(os.getpid()))
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            return None
        except BaseException:
            _stop(proc)
            raise


def _terminate_with(parent: int):
    """For the child, before exec: SIGTERM when its starter dies (prctl PR_SET_PDEATHSIG); a sweep
    that died before that was set ends the child at once."""
    def preexec() -> None:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _stop(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=STOP_WAIT_S)
            return
        except subprocess.TimeoutExpired:
            continue


def last_line(path: str) -> str:
    """The last non-empty line of a (possibly large) text file."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            tail = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1] if lines else ""
