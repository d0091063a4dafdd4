"""What tfbench's runs could leave on this machine when a clean-up fails: their processes (tasks,
namespace wrappers, horovodrun, delay lines, the Slurm job follower and node monitors, and the
daemons of a private Slurm, whose files sit in a tfbench-* directory), network namespaces,
interfaces (links, TAP devices, login links: all named tfb*), namespace owner files and the runs'
scratch directories (their tasks' TMPDIR, tfbench.results.rundir).

A snapshot before and after a run, a soak (tools.bench.soak) or the test suite (tests/conftest.py),
compared kind by kind, shows what was left behind.
"""
from __future__ import annotations

import os
import tempfile
import time
from typing import Callable, Dict, Set

import psutil

from cluster.net import netns
from tfbench.results.rundir import SCRATCH_PREFIX

COMMANDS = ("tfbench.task", "-m tfbench", "horovodrun", "cluster.net.netns_exec", "cluster.net.delay_line",
            "cluster.slurm.job", "cluster.slurm.node_monitor")
DAEMONS = {"slurmd", "slurmctld", "slurmstepd", "munged"}


def _describe(p: psutil.Process) -> str:
    """'<pid> <command>' if p is something a run of tfbench starts, else ''."""
    cmdline = p.info["cmdline"] or []
    command = " ".join(cmdline)
    if any(k in command for k in COMMANDS) or (p.info["name"] in DAEMONS and "tfbench-" in command):
        return f"{p.pid} {command[:80]}"
    return ""


def processes() -> Set[str]:
    me, found = os.getpid(), set()
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            line = _describe(p) if p.pid != me else ""
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if line:
            found.add(line)
    return found


def snapshot() -> Dict[str, Set[str]]:
    """Each kind of leftover present now."""
    owners = sorted(os.listdir(netns.OWNER_DIR)) if os.path.isdir(netns.OWNER_DIR) else []
    return {"processes": processes(), "namespaces": set(netns.list_namespaces()),
            "interfaces": {i for i in psutil.net_if_addrs() if i.startswith("tfb")},
            "namespace owner files": set(owners),
            "scratch directories": {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(SCRATCH_PREFIX)}}


def new_since(before: Dict[str, Set[str]], now: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    """What `now` holds that `before` did not, kind by kind."""
    return {kind: items - before.get(kind, set()) for kind, items in now.items()}


def left_since(before: Dict[str, Set[str]], settle_s: float,
               take: Callable[[], Dict[str, Set[str]]] = snapshot) -> Dict[str, Set[str]]:
    """What `take()` holds that `before` did not, once it is gone or `settle_s` have passed: a
    clean-up may still be reaping what it stopped."""
    deadline = time.monotonic() + settle_s
    while True:
        extra = new_since(before, take())
        if not any(extra.values()) or time.monotonic() > deadline:
            return extra
        time.sleep(0.5)
