"""Bytes sent and received per process, from the kernel's per-socket TCP counters.

Interface counters cannot tell tasks apart (every task on one host talks over the same
loopback), so traffic is attributed through sockets: sock_diag reports each TCP socket's
tcpi_bytes_acked / tcpi_bytes_received with its inode, and /proc/<pid>/fd says which process
holds which inode. A socket stays with the first process seen holding it, and a socket that
closes keeps its last-seen counts in its owner's total, so totals never go backwards. Traffic
after a socket's last sample before it closes is not seen, nor are sockets that open and close
between two samples; TensorFlow's gRPC channels live for the whole run.

Only sockets in the monitor's network namespace are visible; tasks in other namespaces need
another NetSource (e.g. per-host interface counters).
"""
from __future__ import annotations

import os
import socket
from typing import Callable, Collection, Dict, Optional, Protocol, Set, Tuple

Counts = Tuple[int, int]  # (bytes sent, bytes received)


class NetSource(Protocol):
    """Cumulative traffic per process: sample(pids) -> {pid: (tx_bytes, rx_bytes)}.

    Counts must never decrease for a pid; pids with nothing to report may be left out.
    """

    def sample(self, pids: Collection[int]) -> Dict[int, Counts]: ...

    def close(self) -> None: ...


class TcpCounters:
    """Reads every TCP socket's byte counters in this network namespace through sock_diag."""

    def __init__(self):
        from pyroute2 import DiagSocket
        from pyroute2.netlink.diag import SS_CLOSE, SS_CONN

        self._states = SS_CONN | (1 << SS_CLOSE)
        self._diag = DiagSocket()
        self._diag.bind()

    def read(self) -> Dict[int, Counts]:
        """{socket inode: (bytes acked by the peer, bytes received)}."""
        inet_diag_info = 1 << (2 - 1)  # request INET_DIAG_INFO (tcp_info)
        counts: Dict[int, Counts] = {}
        for family in (socket.AF_INET, socket.AF_INET6):
            for msg in self._diag.get_sock_stats(family=family, states=self._states,
                                                 extensions=inet_diag_info):
                inode = msg.get("idiag_inode")
                info = msg.get_attr("INET_DIAG_INFO")
                if not inode or info is None:
                    continue
                tx, rx = info.get("tcpi_bytes_acked"), info.get("tcpi_bytes_received")
                if tx is not None and rx is not None:
                    counts[inode] = (int(tx), int(rx))
        return counts

    def close(self) -> None:
        self._diag.close()


def socket_inodes(pid: int) -> Set[int]:
    """Inodes of the sockets process `pid` holds open (empty if it is gone or unreadable)."""
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return set()
    inodes = set()
    for name in names:
        try:
            target = os.readlink(os.path.join(fd_dir, name))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


class SocketTraffic:
    """NetSource over TCP sockets: cumulative bytes per pid, kept after sockets close."""

    def __init__(self, counters: Optional[Callable[[], Dict[int, Counts]]] = None,
                 inodes_of: Callable[[int], Set[int]] = socket_inodes):
        self._reader = None
        if counters is None:
            self._reader = TcpCounters()
            counters = self._reader.read
        self._counters = counters
        self._inodes_of = inodes_of
        self._owner: Dict[int, int] = {}  # socket inode -> pid
        self._last: Dict[int, Counts] = {}  # socket inode -> last-seen counts
        self._closed: Dict[int, Counts] = {}  # pid -> sum of its closed sockets' last counts

    def _retire(self, inode: int) -> None:
        pid = self._owner[inode]
        tx, rx = self._closed.get(pid, (0, 0))
        last_tx, last_rx = self._last[inode]
        self._closed[pid] = (tx + last_tx, rx + last_rx)

    def sample(self, pids: Collection[int]) -> Dict[int, Counts]:
        current = self._counters()
        for pid in pids:
            for inode in self._inodes_of(pid):
                if inode in current:
                    self._owner.setdefault(inode, pid)
        for inode, pid in list(self._owner.items()):
            counts = current.get(inode)
            last = self._last.get(inode)
            if last is not None and (counts is None or counts[0] < last[0] or counts[1] < last[1]):
                self._retire(inode)  # closed, or the inode now names a new socket
                del self._last[inode]
            if counts is None:
                del self._owner[inode]
            else:
                self._last[inode] = counts
        totals = {pid: self._closed.get(pid, (0, 0)) for pid in pids}
        for inode, pid in self._owner.items():
            if pid in totals:
                tx, rx = totals[pid]
                totals[pid] = (tx + self._last[inode][0], rx + self._last[inode][1])
        return totals

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()


def default_source() -> Optional[NetSource]:
    """SocketTraffic, or None where sock_diag is unavailable (then no per-task traffic)."""
    try:
        return SocketTraffic()
    except (ImportError, OSError):
        return None
