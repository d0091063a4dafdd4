"""Network namespaces of emulated runs: names, ownership, support checks and removal.

Every namespace of a run is named tfb-<key>-<part> (key: 6 hex digits per run, part: "sw" for
the switch that holds the bridge, h0, h1, ... for hosts). Before creating any, the run writes
an owner file /run/tfbench/netns/<key>.json with its pid and start time, so that the namespaces
of a run whose launcher died (even by SIGKILL) are recognised at the next start, or by

    python -m cluster.net.netns --cleanup        remove namespaces of runs whose owner is gone
    python -m cluster.net.netns --list           show every tfbench namespace and its owner

Removing a namespace first kills the processes still inside it (a delayed run's delay line
lives in its switch namespace); its veth ends, and with them their peers, its TAP devices, the
bridge and the shaping, go with the namespace. Nothing is created in the machine's own namespace
but the login link of a private Slurm's nodes (cluster.net.root_link), a veth whose peer is in the
switch namespace, so it goes too.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

import psutil

from cluster.net import ownership
from cluster.net import delay_line

PREFIX = "tfb-"
NETNS_DIR = "/run/netns"
OWNER_DIR = "/run/tfbench/netns"
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_key(run_path: str) -> str:
    """6 hex digits naming a run's namespaces; the pid keeps two runs of one path apart."""
    return hashlib.sha1(f"{run_path}:{os.getpid()}:{time.time()}".encode()).hexdigest()[:6]


def ns_name(key: str, part: str) -> str:
    return f"{PREFIX}{key}-{part}"


def key_of(name: str) -> Optional[str]:
    if not name.startswith(PREFIX):
        return None
    key = name[len(PREFIX):].split("-", 1)[0]
    return key if len(key) == 6 else None


def list_namespaces() -> List[str]:
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if key_of(n))
    except FileNotFoundError:
        return []


# ---- ownership ------------------------------------------------------------------------------

def _owner_path(key: str) -> str:
    return os.path.join(OWNER_DIR, f"{key}.json")


def claim(key: str, run_path: str) -> None:
    """Records this process as the owner of the run's namespaces, before any exists."""
    os.makedirs(OWNER_DIR, exist_ok=True)
    ownership.write(_owner_path(key), run_path)


def owner(key: str) -> Optional[dict]:
    return ownership.read(_owner_path(key))


def owner_alive(key: str) -> bool:
    return ownership.alive(owner(key))


def release(key: str) -> None:
    try:
        os.remove(_owner_path(key))
    except FileNotFoundError:
        pass


# ---- removal --------------------------------------------------------------------------------

def _ns_inode(path: str) -> Optional[int]:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def processes_in(name: str) -> List[psutil.Process]:
    """Processes whose network namespace is `name` (compared by the namespace's inode)."""
    inode = _ns_inode(os.path.join(NETNS_DIR, name))
    if inode is None:
        return []
    found = []
    for proc in psutil.process_iter():
        if _ns_inode(f"/proc/{proc.pid}/ns/net") == inode and proc.pid != os.getpid():
            found.append(proc)
    return found


def remove_namespaces(names: List[str], grace: float = 2.0) -> List[str]:
    """Kills what still runs in the namespaces (SIGTERM, then SIGKILL) and removes them;
    returns the names that could not be removed."""
    from pyroute2 import netns

    procs = [p for n in names for p in processes_in(n)]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 1.0)):
        for p in procs:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        _, procs = psutil.wait_procs(procs, timeout=wait)
        if not procs:
            break
    left = []
    for name in names:
        try:
            netns.remove(name)
        except FileNotFoundError:
            pass
        except OSError:
            left.append(name)
    return left


def remove_run(key: str) -> List[str]:
    """Removes every namespace of run `key` and its owner file; returns what was left."""
    left = remove_namespaces([n for n in list_namespaces() if key_of(n) == key])
    if not left:
        release(key)
    return left


def open_run(run_path: str) -> str:
    """The key of a starting run's namespaces, claimed for this process, after removing what dead
    runs left behind."""
    cleanup_stale()
    key = run_key(run_path)
    claim(key, run_path)
    return key


def close_run(key: str) -> None:
    """Removes the run's namespaces; RuntimeError naming any that could not be removed."""
    left = remove_run(key)
    if left:
        raise RuntimeError(f"could not remove namespaces {left}; `python -m cluster.net.netns --cleanup` "
                           f"will once their processes are gone")


def stale_keys() -> List[str]:
    """Runs with namespaces or an owner file whose owner process is gone."""
    keys = {key_of(n) for n in list_namespaces()}
    try:
        keys |= {f[:-5] for f in os.listdir(OWNER_DIR) if f.endswith(".json")}
    except FileNotFoundError:
        pass
    return sorted(k for k in keys if k and not owner_alive(k))


def cleanup_stale() -> Dict[str, List[str]]:
    """Removes the namespaces of every dead run: {key: names that could not be removed}."""
    return {key: remove_run(key) for key in stale_keys()}


# ---- support checks (before anything starts) --------------------------------------------------

_PROBE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x40000000) != 0:  # CLONE_NEWNET
    print("unshare:" + os.strerror(ctypes.get_errno())); sys.exit(0)
from pyroute2 import IPRoute
ipr = IPRoute()
lo = ipr.link_lookup(ifname="lo")[0]
ipr.link("set", index=lo, state="up")
try:
    ipr.tc("add", "tbf", index=lo, handle="1:", rate="10mbit", burst=32768, latency="50ms")
    ipr.tc("del", index=lo, handle="1:", root=True)
    print("tbf:ok")
except Exception as e:
    print("tbf:" + str(e))
from cluster.net import taps
print("tap:" + (taps.support_error() or "ok"))
"""


def probe() -> Dict[str, str]:
    """What this user and kernel allow, tried in a throwaway namespace of a child process
    (gone with it, and with it the probe's TAP device): {"unshare"|"tbf"|"tap": "ok" or the error}."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (PROJECT_ROOT, os.environ.get("PYTHONPATH")) if p))
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=30,
                             env=env).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return {"unshare": str(e)}
    found = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return found or {"unshare": "the namespace probe printed nothing"}


def support_error(want_delay: bool, delay_ms: float = 0.0, jitter_ms: float = 0.0, rate_bps: int = 0) -> Optional[str]:
    """One line saying why an emulated run cannot start here, or None. A delay needs TAP devices
    for the user-space delay line (no sch_netem), and delay, jitter and rate that it can keep
    faithfully (cluster.net.delay_line.refusal)."""
    if os.geteuid() != 0:
        return "--network=emulated needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to create network namespaces"
    if not os.access(os.path.dirname(NETNS_DIR), os.W_OK):
        return f"--network=emulated cannot create network namespaces: {os.path.dirname(NETNS_DIR)} is not writable"
    found = probe()
    if "unshare" in found:
        return f"--network=emulated cannot create network namespaces here: {found['unshare']}"
    if found.get("tbf") != "ok":
        return f"--network=emulated needs the kernel's tbf qdisc for link shaping: {found.get('tbf')}"
    if want_delay or delay_ms or jitter_ms:
        if found.get("tap") != "ok":
            return f"--link_latency needs TAP devices for its user-space delay line: {found.get('tap')}"
        return delay_line.refusal(delay_ms, jitter_ms, rate_bps)
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--helpfull", action="help", help="the same as --help")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--cleanup", action="store_true", help="remove namespaces of runs whose owner is gone")
    group.add_argument("--list", action="store_true", help="list tfbench namespaces and their owners")
    args = parser.parse_args(argv)
    if args.list:
        for name in list_namespaces():
            info, key = owner(key_of(name)) or {}, key_of(name)
            state = "running" if owner_alive(key) else "stale"
            print(f"{name}\t{state}\tpid={info.get('pid', '?')}\t{info.get('run_dir', '?')}")
        return 0
    failed = False
    for key, left in cleanup_stale().items():
        print(f"tfbench: removed the namespaces of stale run {key}" + (f"; could not remove {left}" if left else ""))
        failed = failed or bool(left)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
