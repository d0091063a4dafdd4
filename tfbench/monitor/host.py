"""Host-wide CPU, memory and per-interface traffic, for context around the per-task series.

Interface counters include every process on the host (and other engineers' jobs on a shared
machine); per-task traffic comes from netstat instead. Totals count from the monitor's start.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

import psutil


@dataclasses.dataclass(frozen=True)
class NicSample:
    tx_bytes: int  # since the monitor started
    rx_bytes: int
    tx_kbps: float  # kilobits per second since the previous sample
    rx_kbps: float


@dataclasses.dataclass(frozen=True)
class HostSample:
    cpu_percent: float  # mean over all cores, 0..100
    mem_used_bytes: int  # total - available: what the kernel could not hand out without swapping
    mem_total_bytes: int
    nics: Dict[str, NicSample]


def kbps(byte_delta: float, seconds: float) -> float:
    return byte_delta * 8 / 1000 / seconds if seconds > 0 else 0.0


class HostSampler:
    def __init__(self, now: float):
        psutil.cpu_percent(interval=None)  # primes the counter psutil compares against
        self._start = self._nic_counters()
        self._last: Tuple[float, Dict[str, Tuple[int, int]]] = (now, self._start)

    @staticmethod
    def _nic_counters() -> Dict[str, Tuple[int, int]]:
        return {name: (c.bytes_sent, c.bytes_recv)
                for name, c in psutil.net_io_counters(pernic=True, nowrap=True).items()}

    def sample(self, now: float) -> HostSample:
        mem = psutil.virtual_memory()
        last_time, last = self._last
        current = self._nic_counters()
        nics = {}
        for name, (tx, rx) in current.items():
            start_tx, start_rx = self._start.setdefault(name, (tx, rx))
            prev_tx, prev_rx = last.get(name, (tx, rx))
            nics[name] = NicSample(tx_bytes=tx - start_tx, rx_bytes=rx - start_rx,
                                   tx_kbps=kbps(tx - prev_tx, now - last_time),
                                   rx_kbps=kbps(rx - prev_rx, now - last_time))
        self._last = (now, current)
        return HostSample(cpu_percent=psutil.cpu_percent(interval=None),
                          mem_used_bytes=mem.total - mem.available, mem_total_bytes=mem.total,
                          nics=nics)


def machine_cores() -> int:
    return psutil.cpu_count(logical=True) or 1
