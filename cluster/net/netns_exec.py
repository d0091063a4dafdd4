"""Entering an emulated host: `python -m cluster.net.netns_exec NAME [--hostname H] [--hosts FILE] -- COMMAND...`.

The process joins network namespace NAME (setns), with --hostname also a UTS namespace of its
own whose hostname is H (the host's address: libraries that find their address by resolving
the hostname, as Gloo does for Horovod's process sets, then find the host's and not
127.0.0.1), and execs COMMAND, so the task keeps the pid, session and process group the
launcher gave it, with PR_SET_PDEATHSIG set (kept across the exec): a command that is not a
task of ours (horovodrun) also ends when the launcher dies. With --hosts the process also gets a
mount namespace of its own in which FILE is bind-mounted over /etc/hosts (as `ip netns exec`
does with /etc/netns/NAME/hosts), so that the names of a private cluster's nodes resolve inside
the nodes and nowhere else; the other runs' namespace files are detached from that copy of the
mount table, so that it never keeps their namespaces (and links) alive. Only the standard library
is used: this runs before every task of an emulated run. run_in() does the same for one thread
of the calling process (setns is per thread), e.g. to open a listening socket inside a namespace.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from typing import Callable, TypeVar

CLONE_NEWNET = 0x40000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 0x1000, 0x4000, 0x40000, 2
NETNS_DIR = "/run/netns"
T = TypeVar("T")


def enter(name: str) -> None:
    """Moves the calling thread into namespace `name` (never creates one)."""
    fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {name}: {os.strerror(err)}")
    finally:
        os.close(fd)


def set_hostname(hostname: str) -> None:
    """A UTS namespace of this process's own, named `hostname`."""
    libc = ctypes.CDLL(None, use_errno=True)
    name = hostname.encode()
    if libc.unshare(CLONE_NEWUTS) != 0 or libc.sethostname(name, len(name)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"hostname {hostname}: {os.strerror(err)}")


def private_hosts(path: str) -> None:
    """A mount namespace of this process's own whose /etc/hosts is `path`."""
    libc = ctypes.CDLL(None, use_errno=True)

    def check(ok: bool, what: str) -> None:
        if not ok:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    check(libc.unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0, "mount --make-rprivate /")
    with open("/proc/self/mounts", encoding="utf-8") as f:
        pinned = [line.split()[1] for line in f if line.split()[1].startswith(NETNS_DIR + "/")]
    for target in pinned:
        libc.umount2(target.encode(), MNT_DETACH)
    check(libc.mount(path.encode(), b"/etc/hosts", None, MS_BIND, None) == 0, f"bind {path} on /etc/hosts")


def run_in(name: str, fn: Callable[[], T], timeout: float = 30.0) -> T:
    """fn() called in a fresh thread inside namespace `name`; its result or its exception."""
    box: dict = {}

    def target():
        try:
            enter(name)
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    thread = threading.Thread(target=target, name=f"netns-{name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if "error" in box:
        raise box["error"]
    if "value" not in box:
        raise TimeoutError(f"no result from namespace {name} within {timeout:g} s")
    return box["value"]


def command(name: str, argv, hostname: str = "", hosts: str = "") -> list:
    """The command that runs argv inside namespace `name` (and named `hostname`, with /etc/hosts
    replaced by the file `hosts`)."""
    return [sys.executable, "-m", "cluster.net.netns_exec", name, *(["--hostname", hostname] if hostname else []),
            *(["--hosts", hosts] if hosts else []), "--", *argv]


def main(argv) -> int:
    parent = os.getppid()  # the launcher, before anything could have made this process an orphan
    options = {}
    while len(argv) > 2 and argv[1] in ("--hostname", "--hosts"):
        options[argv[1]], argv = argv[2], [argv[0], *argv[3:]]
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m cluster.net.netns_exec NAME [--hostname H] [--hosts FILE] -- COMMAND...",
              file=sys.stderr)
        return 2
    try:
        enter(argv[0])
        if options.get("--hostname"):
            set_hostname(options["--hostname"])
        if options.get("--hosts"):
            private_hosts(options["--hosts"])
    except OSError as e:
        print(f"tfbench: cannot enter emulated host {argv[0]}: {e}", file=sys.stderr, flush=True)
        return 1
    die_with_parent(parent)
    os.execvp(argv[2], argv[2:])
    return 1  # not reached


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """Signal `sig` when the launcher (pid `parent`) dies, even by SIGKILL; it outlives
    the exec, so a command that starts processes of its own is told to stop them too (horovodrun
    asks for SIGKILL instead, which its per-rank middlemen notice: cluster.horovod.horovodrun)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the launcher died before the request was made: adopted since
        sys.exit(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
