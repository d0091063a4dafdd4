"""Workloads, one registry: what a step consumes, the unit it counts, its loss, its model and its
batches (tfbench.workloads.base.Workload), registered in one place the way launch kinds and
strategies are (tfbench.config.kinds, tfbench.config.strategy_traits).

Every image model of tfbench.models is an image workload under its own name; the transformer
presets are token workloads (tfbench.workloads.tokens); `package.module:function` is the user's
own model (tfbench.workloads.user). `of(name)` is the one lookup of what --model names.
"""
from __future__ import annotations

from typing import Dict

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


def flag_owners() -> Dict[str, Dict[str, str]]:
    """{flag: {kind of workload that reads it: one such workload's name}}: a flag off its default is
    refused for the others."""
    owners: Dict[str, Dict[str, str]] = {}
    for workload in WORKLOADS.values():
        for flag in workload.reads:
            owners.setdefault(flag, {}).setdefault(f"{workload.kind} workloads", workload.name)
    return owners


def check(config, defaults) -> None:
    """The workload --model names checks the flags it reads; a flag only other kinds of workload
    read is refused off its default (`defaults`: a RunConfig of defaults)."""
    workload = of(config.model)
    for flag, kinds in flag_owners().items():
        if flag not in workload.reads and getattr(config, flag) != getattr(defaults, flag):
            raise WorkloadError(f"--{flag} applies to {' and '.join(kinds)} only "
                                f"(e.g. --model={next(iter(kinds.values()))}), not to {config.model}")
    workload.check(config)
