"""Workloads, one registry: what --model names, by kind. A kind (tfbench.workloads.base.WorkloadKind)
is one module that declares its workloads (what a step consumes, the unit it counts, its loss,
its model and its batches: tfbench.workloads.base.Workload) and the arguments only it reads
(tfbench.workloads.arguments), and one line of KINDS below, the way launch kinds and strategies
are registered (tfbench.config.kinds, tfbench.config.strategy_traits).

Image models (tfbench's own CNNs and every tf_keras.applications model: one ModelSpec line each
in tfbench.workloads.images), recommenders (tfbench.workloads.recommender), transformer presets
(tfbench.workloads.tokens) and the user's own model as `package.module:function`
(tfbench.workloads.user). `of(name)` is the one lookup of what --model names.
"""
from __future__ import annotations

from typing import Dict, Tuple

from tfbench.workloads import images, recommender, tokens, user
from tfbench.workloads.arguments import Arguments
from tfbench.workloads.base import UNITS, Workload, WorkloadError, WorkloadKind  # noqa: F401
from tfbench.workloads.images import ImageWorkload  # noqa: F401
from tfbench.workloads.recommender import RecommenderWorkload  # noqa: F401
from tfbench.workloads.tokens import TransformerWorkload  # noqa: F401

KINDS: Tuple[WorkloadKind, ...] = (
    images.KIND,
    recommender.KIND,
    tokens.KIND,
    user.KIND,
)
WORKLOADS: Dict[str, Workload] = {name: w for kind in KINDS for name, w in kind.workloads.items()}
ARGUMENTS: Tuple[Arguments, ...] = tuple(kind.arguments for kind in KINDS if kind.arguments.args)
assert len({a.name for group in ARGUMENTS for a in group.args}) == sum(len(g.args) for g in ARGUMENTS), \
    "an argument declared by two kinds"


def model_help() -> str:
    """--model's help: every kind's words for what it names."""
    return f"Workload: {', '.join(kind.model_help for kind in KINDS)}."


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
