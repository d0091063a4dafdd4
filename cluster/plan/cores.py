"""Allotting this machine's cores to tasks, so TensorFlow processes do not oversubscribe them.

Measured: two TensorFlow processes sharing two cores with default threading ran a step about
6x slower than one process alone. Compute tasks get disjoint cores and matching thread counts;
a ps and the coordinator get cores of their own when the machine has them, and share (with
the tasks the plan names) only when it does not.
"""
from __future__ import annotations

import os
from typing import Dict, List, Sequence, Tuple


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


def split_with_reserve(cores: Sequence[int], n: int, per_task: int, reserve: Sequence[int]
                       ) -> Tuple[List[Tuple[int, ...]], Tuple[int, ...], bool]:
    """split_cores, keeping cores for the light tasks when the machine has them.

    `reserve` lists, most important first, how many cores light tasks would like (e.g. the ps,
    then the coordinator). With `per_task` fixed the light tasks get whatever is left over;
    with per_task=0 (split evenly) as many reservations as still leave every compute task a
    core are taken off before splitting."""
    cores = tuple(cores)
    if per_task or not reserve:
        return split_cores(cores, n, per_task)
    kept = list(reserve)
    while kept and len(cores) - sum(kept) < max(1, n):
        kept.pop()
    usable = len(cores) - sum(kept)
    groups, _, enough = split_cores(cores[:usable], n)
    return groups, cores[sum(len(g) for g in groups) if enough else usable:], enough


def sharing(tasks: Dict[str, Tuple[int, ...]]) -> Dict[str, Tuple[str, ...]]:
    """task -> the other tasks pinned to any of its cores (tasks without cores share nothing)."""
    out = {}
    for name, mine in tasks.items():
        others = tuple(other for other, theirs in tasks.items()
                       if other != name and set(mine) & set(theirs))
        if others:
            out[name] = others
    return out
