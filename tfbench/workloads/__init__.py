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
from tfbench.workloads.base import UNITS, Workload, WorkloadError  # noqa: F401
from tfbench.workloads.images import ImageWorkload, image_workloads  # noqa: F401
from tfbench.workloads.tokens import TransformerWorkload, transformer_workloads  # noqa: F401
from tfbench.workloads import tokens, user

WORKLOADS: Dict[str, Workload] = {**image_workloads(MODELS), **transformer_workloads()}
# Flags only some workloads read: given to another workload, they are refused (check()).
OWN_FLAGS = {flag: "the transformers (bert_tiny, bert_base)" for flag in tokens.FLAGS}
OWN_FLAGS["data_dir"] = "image workloads, and user models that declare images"


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


def check(config, defaults) -> None:
    """The workload --model names checks the flags it reads; flags it does not read but other
    workloads do are refused when set (`defaults`: a RunConfig of defaults)."""
    workload = of(config.model)
    reads = set(workload.flags) | ({"data_dir"} if workload.reads_files else set())
    for flag, owners in OWN_FLAGS.items():
        if flag not in reads and getattr(config, flag) != getattr(defaults, flag):
            raise WorkloadError(f"--{flag} applies to {owners}; --model={config.model} does not read it")
    workload.check(config)
