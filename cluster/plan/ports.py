"""Ports for TensorFlow servers: free ones on this machine, a fixed range on other hosts."""
from __future__ import annotations

import socket
from typing import Dict

import portpicker

from tfbench.config import is_this_machine as is_local

DEFAULT_REMOTE_BASE_PORT = 2222


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


class PortAllocator:
    """Local hosts: ports portpicker finds free. Other hosts: base_port, base_port+1, ... per host."""

    def __init__(self, base_port: int = 0):
        self._base_port = base_port
        self._next: Dict[str, int] = {}
        self._taken: set = set()

    def port_for(self, host: str) -> int:
        if is_local(host) and not self._base_port:
            while True:
                port = portpicker.pick_unused_port()
                if port not in self._taken:
                    self._taken.add(port)
                    return port
        port = self._next.get(host, self._base_port or DEFAULT_REMOTE_BASE_PORT)
        self._next[host] = port + 1
        return port
