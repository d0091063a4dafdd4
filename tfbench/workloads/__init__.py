"""Workloads, one registry: what a step consumes, the unit it counts, its loss, its model and its
batches (tfbench.workloads.base.Workload), registered in one place the way launch kinds and
strategies are (tfbench.config.kinds, tfbench.config.strategy_traits).

Every image model of tfbench.models is an image workload under its own name; the transformer
presets are token workloads (tfbench.workloads.tokens); `package.module:function` is the user's
own model (tfbench.workloads.user). `of(name)` is the one lookup of what --model names.
"""
from __future__ import annotations

from typing import Dict, List

from tfbench.models import MODELS
from tfbench.workloads import user
from tfbench.workloads.base import UNITS, Workload, WorkloadError  # noqa: F401
from tfbench.workloads.images import ImageWorkload, image_workloads  # noqa: F401
from tfbench.workloads.recommender import RECOMMENDERS, RecommenderWorkload  # noqa: F401
from tfbench.workloads.tokens import TransformerWorkload, transformer_workloads  # noqa: F401

WORKLOADS: Dict[str, Workload] = {**image_workloads(MODELS), **RECOMMENDERS, **transformer_workloads()}


def of(name: str) -> Workload:
    """The workload --model names (a user's package.module:function is checked first, see
    tfbench.workloads.user); WorkloadError (one line) for one tfbench does not know."""
    if user.is_spec(name):
        return user.load(name)
    try:
        return WORKLOADS[name]
    except KeyError:
        raise WorkloadError(f"--model={name!r} is unknown; choose one of {', '.join(sorted(WORKLOADS))}, "
                            f"or your own as package.module:function") from None


def flag_owners() -> Dict[str, List[str]]:
    """{flag: the kinds of workload that read it}: a flag off its default is refused for the others.
    --data_dir belongs to every workload that reads files (a user's model declaring images too)."""
    owners: Dict[str, List[str]] = {}
    for workload in WORKLOADS.values():
        reads = workload.own_flags + (("data_dir",) if workload.reads_files else ())
        for flag in reads:
            kind = f"{workload.kind} workloads"
            if kind not in owners.setdefault(flag, []):
                owners[flag].append(kind)
    return owners


def examples(kind: str, limit: int = 4) -> str:
    """A few names of the workloads of one kind, for messages."""
    names = [w.name for w in WORKLOADS.values() if f"{w.kind} workloads" == kind]
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def check(config, defaults) -> None:
    """The workload --model names checks the flags it reads; a flag only other kinds of workload
    read is refused off its default (`defaults`: a RunConfig of defaults)."""
    workload = of(config.model)
    reads = set(workload.own_flags) | ({"data_dir"} if workload.reads_files else set())
    for flag, kinds in flag_owners().items():
        if flag not in reads and getattr(config, flag) != getattr(defaults, flag):
            raise WorkloadError(f"--{flag} applies to {' and '.join(kinds)} only "
                                f"(e.g. --model={examples(kinds[0]).split(',')[0]}), not to {config.model}")
    workload.check(config)
