"""Workloads, one registry: what a step consumes, the unit it counts, its loss, its model and its
batches (tfbench.workloads.base.Workload), registered in one place the way launch kinds and
strategies are (tfbench.config.kinds, tfbench.config.strategy_traits).

Every image model of tfbench.models is an image workload under its own name. `of(name)` is the
one lookup: --model names a registered workload.
"""
from __future__ import annotations

from typing import Dict, List

from tfbench.models import MODELS
from tfbench.workloads.base import UNITS, Workload, WorkloadError  # noqa: F401
from tfbench.workloads.images import ImageWorkload, image_workloads  # noqa: F401
from tfbench.workloads.recommender import RECOMMENDERS, RecommenderWorkload  # noqa: F401

WORKLOADS: Dict[str, Workload] = {**image_workloads(MODELS), **RECOMMENDERS}


def of(name: str) -> Workload:
    """The workload --model names; WorkloadError (one line) for one tfbench does not know."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise WorkloadError(f"--model={name!r} is unknown; choose one of {', '.join(sorted(WORKLOADS))}") from None


def flag_owners() -> Dict[str, List[str]]:
    """{flag: the kinds of workload that read it}: a flag off its default is refused for the others."""
    owners: Dict[str, List[str]] = {}
    for workload in WORKLOADS.values():
        for flag in workload.own_flags:
            kind = f"{workload.inputs} workloads"
            if kind not in owners.setdefault(flag, []):
                owners[flag].append(kind)
    return owners


def examples(kind: str, limit: int = 4) -> str:
    """A few names of the workloads of one kind, for messages."""
    names = [w.name for w in WORKLOADS.values() if f"{w.inputs} workloads" == kind]
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
