"""Allotting this machine's cores to tasks, so TensorFlow processes do not oversubscribe them.

Measured: two TensorFlow processes sharing two cores with default threading ran a step about
6x slower than one process alone. Compute tasks get disjoint cores and matching thread counts;
light tasks (a ps collocated with a worker, the coordinator) share.
"""
from __future__ import annotations

import os
from typing import List, Sequence, Tuple


def available_cores() -> Tuple[int, ...]:
    return tuple(sorted(os.sched_getaffinity(0)))


def split_cores(cores: Sequence[int], n: int, per_task: int = 0
                ) -> Tuple[List[Tuple[int, ...]], Tuple[int, ...], bool]:
    """Splits `cores` among n compute tasks, `per_task` each (0: as many as divide evenly):
    (each task's cores, leftover cores, enough?)."""
    cores = tuple(cores)
    if n * max(1, per_task) <= len(cores):
        per = per_task or len(cores) // n
        groups = [cores[i * per:(i + 1) * per] for i in range(n)]
        return groups, cores[n * per:], True
    return [(cores[i % len(cores)],) for i in range(n)], (), False


def thread_counts(cores: Sequence[int], intra: int = 0, inter: int = 0) -> Tuple[int, int]:
    """Intra-op threads default to the task's cores; inter-op to at most 2."""
    n = max(1, len(cores))
    return intra or n, inter or min(2, n)
