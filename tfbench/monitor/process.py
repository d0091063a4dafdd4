"""CPU, memory and threads of one task: its process and every descendant.

CPU comes from cumulative CPU times rather than psutil's cpu_percent: the tree's total
(user + system + reaped children's) only grows, so a helper process that exits between two
samples still counts, and a task's first sample covers the time since it started instead of
reading 0. Processes that vanish or turn into zombies mid-sample are skipped, never raised.
"""
from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

import psutil

_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, ProcessLookupError,
         FileNotFoundError, PermissionError)


@dataclasses.dataclass(frozen=True)
class TreeSample:
    cpu_percent: float  # 100 = one core busy
    rss_bytes: int  # summed over the tree (shared pages count once per process)
    peak_rss_bytes: int  # highest tree RSS seen, or one process's kernel high-water mark if larger
    threads: int
    pids: Tuple[int, ...]


class ProcessTree:
    """Samples the tree rooted at `pid`; `sample()` returns None once the root has exited."""

    def __init__(self, pid: int):
        self.pid = pid
        self._root: Optional[psutil.Process] = None
        self._last_time = 0.0
        self._last_cpu = 0.0
        self._peak_rss = 0
        self.start_time = 0.0
        try:
            self._root = psutil.Process(pid)
            self.start_time = self._last_time = self._root.create_time()
        except _GONE:
            self._root = None

    def alive(self) -> bool:
        if self._root is None:
            return False
        try:
            return self._root.is_running() and self._root.status() != psutil.STATUS_ZOMBIE
        except _GONE:
            return False

    def sample(self, now: float) -> Optional[TreeSample]:
        if not self.alive():
            return None
        try:
            procs: List[psutil.Process] = [self._root] + self._root.children(recursive=True)
        except _GONE:
            return None
        cpu_total, rss, threads, hwm, pids = 0.0, 0, 0, 0, []
        for proc in procs:
            try:
                with proc.oneshot():
                    t = proc.cpu_times()
                    cpu_total += t.user + t.system + t.children_user + t.children_system
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        continue
                    rss += proc.memory_info().rss
                    threads += proc.num_threads()
                hwm = max(hwm, _rss_high_water_mark(proc.pid))
                pids.append(proc.pid)
            except _GONE:
                continue
        if not pids:
            return None
        elapsed = now - self._last_time
        cpu = max(0.0, cpu_total - self._last_cpu) / elapsed * 100.0 if elapsed > 0 else 0.0
        self._last_time, self._last_cpu = now, cpu_total
        self._peak_rss = max(self._peak_rss, rss, hwm)
        return TreeSample(cpu_percent=cpu, rss_bytes=rss, peak_rss_bytes=self._peak_rss,
                          threads=threads, pids=tuple(pids))


def _rss_high_water_mark(pid: int) -> int:
    """VmHWM: the kernel's peak RSS of one process, which catches spikes between samples."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
