"""Entering a named network namespace: `python -m cluster.netns_exec NAME -- COMMAND...`.

The process joins the namespace (setns) and execs COMMAND, so the task keeps the pid, session
and process group the launcher gave it, and sets PR_SET_PDEATHSIG itself after the exec as
every task does. Only the standard library is used: this runs before every task of an emulated
run. run_in() does the same for one thread of the calling process (setns is per thread), e.g.
to open a listening socket inside a namespace.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Callable, TypeVar

CLONE_NEWNET = 0x40000000
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


def command(name: str, argv) -> list:
    """The command that runs argv inside namespace `name`."""
    return [sys.executable, "-m", "cluster.netns_exec", name, "--", *argv]


def main(argv) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m cluster.netns_exec NAME -- COMMAND...", file=sys.stderr)
        return 2
    try:
        enter(argv[0])
    except OSError as e:
        print(f"tfbench: cannot enter network namespace {argv[0]}: {e}", file=sys.stderr, flush=True)
        return 1
    os.execvp(argv[2], argv[2:])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
