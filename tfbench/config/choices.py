"""The values a run's settings may take, and the small derivations every layer shares.

Kept apart from RunConfig and its validation so that launchers, reports and the performance
model can read the names and parse a link rate without the dataclass or the checks.
"""
from __future__ import annotations

import functools
import re
import socket

from tfbench.config import strategy_traits
from tfbench.config.errors import ConfigError

MODES = ("train", "forward")
DATA_FORMATS = ("NHWC", "NCHW")
PLACEMENTS = ("soft", "hard")
DEVICES = ("cpu", "gpu")
PS_PLACEMENTS = ("collocated", "separate")
ALL_REDUCE = ("auto", "ring", "nccl")
LAUNCHERS = ("local", "slurm")
NETWORKS = ("local", "emulated")
# --optimizer: the SGD every strategy trains with (tfbench.loop.steps builds it) -> (its class, what its
# update of an embedding table's sparse gradient (IndexedSlices) costs on TF 2.21 with tf_keras).
OPTIMIZERS = {
    "sgd": ("tf_keras.optimizers.legacy.SGD", "a scatter of the rows the step touched"),
    "sgd_v2": ("tf_keras.optimizers.SGD", "the whole table, whatever rows the step touched"),
}
# --compute: the forward and backward pass run, or a wait of their measured length (tfbench.loop.emulated)
REAL_COMPUTE, EMULATED_COMPUTE = "real", "emulated"
COMPUTE = (REAL_COMPUTE, EMULATED_COMPUTE)
# Link rates (bits/s): the studies' networks (Graur's 1 Gbit Ethernet and 56 Gbit FDR InfiniBand)
# and today's data-centre Ethernet, for the performance model's predictions (tools.model).
LINK_PRESETS = {"1gbe": 10 ** 9, "10gbe": 10 ** 10, "25gbe": 25 * 10 ** 9, "100gbe": 100 * 10 ** 9,
                "fdr_ib": 56 * 10 ** 9}
# The fastest link tbf can shape: it keeps its rate in bytes/s in 32 bits (~34.4 Gbit/s). A faster
# --link_bandwidth is refused rather than run unshaped under a rate it never had (fdr_ib included).
TBF_MAX_BPS = (2 ** 32 - 1) * 8
_RATE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([kmg]?)(bit)?$", re.IGNORECASE)


@functools.lru_cache(maxsize=None)
def _this_machine_names() -> frozenset:
    return frozenset(("localhost", "::1", socket.gethostname(), socket.getfqdn()))


def is_this_machine(host: str) -> bool:
    """True for the names this machine answers to (the local launcher can start tasks only here)."""
    return host.startswith("127.") or host in _this_machine_names()


def effective_num_ps(strategy: str, num_ps: int) -> int:
    """Parameter servers a run really has: 0 asks for one; strategies without ps have none."""
    traits = strategy_traits.get(strategy)
    return (num_ps or 1) if traits.ps_tasks else 0


def link_rate_bps(value: str) -> int:
    """Bits/s of --link_bandwidth: a preset (1gbe, 10gbe, fdr_ib), or a rate such as 100mbit,
    2.5gbit, 500kbit (tc's units: bit, kbit, mbit, gbit; powers of 1000); "" -> 0 (unshaped)."""
    value = value.strip().lower()
    if not value:
        return 0
    if value in LINK_PRESETS:
        return LINK_PRESETS[value]
    match = _RATE.match(value)
    if not match or (match.group(2) and not match.group(3)):
        raise ConfigError(f"--link_bandwidth={value!r} is not a rate; use e.g. 100mbit, 1gbit, or a preset: "
                          f"{', '.join(LINK_PRESETS)}")
    return int(float(match.group(1)) * 1000 ** " kmg".index(match.group(2).lower() or " "))


def effective_num_local_devices(strategy: str, num_local_devices: int) -> int:
    """Local devices of a strategy that splits its task over several (Mirrored): 0 asks for one;
    other strategies use none."""
    traits = strategy_traits.get(strategy)
    return (num_local_devices or 1) if traits.local_devices else 0
