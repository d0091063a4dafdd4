"""A private network namespace for a local multi-task run, so that its gRPC servers are private.

TensorFlow's gRPC server listens on every address of its host (grpc_server_lib.cc binds
0.0.0.0:<port>; there is no option for another address), and its services run any graph they
are sent, unauthenticated. A local run's tasks therefore start inside a namespace of their own
that has only a loopback interface: they reach each other over its 127.0.0.1 as before, and no
other machine (nor this one, from outside the namespace) can reach them. Creating a namespace
needs root (CAP_SYS_ADMIN); without it the run goes ahead unisolated and its record says so.
The namespace is removed at cleanup, and by the next run if the launcher itself was killed.
"""
from __future__ import annotations

import os
import queue
import threading
from typing import Optional, Tuple

from cluster.net import netns, netns_exec
from tfbench.results.rundir import RunDir

ISOLATION_FILE = "isolation.json"


def needed(traits) -> bool:
    """Strategies whose tasks talk to each other: they start gRPC servers (or Horovod's rendezvous)
    of their own."""
    return traits.multi_task


def create(run: RunDir) -> Tuple[Optional[str], Optional[str], str]:
    """(key, namespace name, '') once created, else (None, None, why not)."""
    if os.geteuid() != 0:
        return None, None, "not root: creating a network namespace needs CAP_SYS_ADMIN"
    from pyroute2 import NetNS
    from pyroute2 import netns as pr_netns

    key = netns.open_run(run.path)
    name = netns.ns_name(key, "local")
    try:
        pr_netns.create(name)
        with NetNS(name, flags=0) as ns:
            ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
    except Exception as e:  # noqa: BLE001 - the run goes ahead unisolated and says why
        netns.remove_run(key)
        return None, None, f"could not create a network namespace: {type(e).__name__}: {e}"
    return key, name, ""


def namespace_of(run: RunDir) -> Optional[str]:
    """The private namespace a run's tasks run in, if any (what the monitor must look into)."""
    path = run.file(ISOLATION_FILE)
    if not os.path.exists(path):
        return None
    return run.read_json(ISOLATION_FILE).get("netns")


class CountersIn:
    """TcpCounters read inside namespace `name`: pyroute2 opens and uses its sock_diag socket in
    the calling thread, so one thread of ours lives in the namespace and does every read."""

    TIMEOUT_S = 10.0

    def __init__(self, name: str):
        self._requests: queue.Queue = queue.Queue()
        self._replies: queue.Queue = queue.Queue()
        self._sent = 0  # requests numbered: a reply that came too late is recognised and dropped
        threading.Thread(target=self._serve, args=(name,), name=f"counters-{name}", daemon=True).start()
        try:
            self._reply(0)  # raises what opening the socket raised
        except BaseException:
            self.close()
            raise

    def _serve(self, name: str) -> None:
        from tfbench.monitor import netstat

        try:
            netns_exec.enter(name)
            counters = netstat.TcpCounters()
        except Exception as e:  # noqa: BLE001 - handed to the caller
            self._replies.put((0, e))
            return
        self._replies.put((0, None))
        while True:
            number = self._requests.get()
            if number is None:
                break
            try:
                self._replies.put((number, counters.read()))
            except Exception as e:  # noqa: BLE001 - handed to the caller
                self._replies.put((number, e))
        counters.close()

    def _reply(self, number: int):
        while True:
            got, reply = self._replies.get(timeout=self.TIMEOUT_S)
            if got == number:
                break
        if isinstance(reply, Exception):
            raise reply
        return reply

    def read(self):
        self._sent += 1
        self._requests.put(self._sent)
        return self._reply(self._sent)

    def close(self) -> None:
        self._requests.put(None)


def net_source(name: str):
    """The monitor's per-task traffic source, reading the sockets of namespace `name`."""
    from tfbench.monitor import netstat

    try:
        reader = CountersIn(name)
    except (ImportError, OSError, queue.Empty):
        return None
    traffic = netstat.SocketTraffic(counters=reader.read)
    traffic._reader = reader  # noqa: SLF001 - closed with the traffic source
    return traffic
