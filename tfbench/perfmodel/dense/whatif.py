"""Answers a report asks of the model: where one parameter server stops keeping up (w*), how
many ps shards a cluster needs, and at what link bandwidth a parameter server is as fast as
ring all-reduce. Each is derived from tfbench.perfmodel.dense.prediction, never fitted on its own.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np

from tfbench.perfmodel.dense import equations as eq
from tfbench.perfmodel.dense.links import rate_text
from tfbench.perfmodel.dense.prediction import Setting, step_s, with_beta

TOLERANCE = 0.10  # "keeps up" / "matches": within 10% of the step compared with
MAX_SHARDS = 1024
BOTTOM_BPS, TOP_BPS = 1e3, 1e13  # bandwidths tried: 1 kbit/s to 10 Tbit/s
GRID = 241  # points of the log grid that brackets the root for brentq (20 per decade)


def w_star(w_bytes: float, compute_s: float, link: eq.Link, num_ps: float = 1, placement: str = eq.SEPARATE,
           sync: bool = True) -> float:
    """The worker count where one ps shard's link time per global step equals the compute time
    C: past it the ps link, not compute, sets the step, and the images/s curve bends flat.

    Synchronous (pull, then push: the link is busy 2*N*W/(k*beta) per step, or 2*(N-1)*W/(k*beta)
    collocated):      separate  w* = k*beta*C / (2W)      collocated  w* = 1 + k*beta*C / (2W)
    Asynchronous (N updates per global step; pulls and pushes use the two directions at once,
    N*W/(k*beta) each): separate  w* = k*beta*C / W        collocated  w* = 1 + k*beta*C / W
    Closed forms of the bytes terms alone (alpha left out); collocated assumes k <= w*.
    """
    if not (w_bytes > 0 and compute_s >= 0 and num_ps >= 1 and placement in eq.PLACEMENTS):
        raise ValueError(f"bad w* inputs: W={w_bytes}, C={compute_s}, k={num_ps}, placement={placement!r}")
    balance = num_ps * link.beta * compute_s / (w_bytes * (2 if sync else 1))
    return balance + (1 if placement == eq.COLLOCATED else 0)


def shards_needed(setting: Setting, n: int, tolerance: float = TOLERANCE,
                  max_shards: int = MAX_SHARDS) -> Optional[int]:
    """The fewest ps shards k whose step at N workers is within `tolerance` of the step with
    unlimited shards (placement as in `setting`); None if no k up to max_shards is."""
    if setting.strategy != "parameter_server":
        raise ValueError("shards_needed asks about a parameter-server setting")
    target = (1 + tolerance) * step_s(dataclasses.replace(setting, num_ps=eq.UNLIMITED), n)
    for k in range(1, max_shards + 1):
        if step_s(dataclasses.replace(setting, num_ps=k), n) <= target * (1 + 1e-12):
            return k
    return None


@dataclasses.dataclass(frozen=True)
class Match:
    """bps: link bandwidth (bits/s) from which the ps step is within the tolerance of ring
    all-reduce's, or None; reason says how it was found or why there is none."""

    bps: Optional[float]
    reason: str


def bandwidth_match(setting: Setting, n: int, tolerance: float = TOLERANCE,
                    ring: Optional[Setting] = None) -> Match:
    """The link bandwidth at which the parameter server of `setting` (its k, placement, sync)
    has a step within `tolerance` of ring all-reduce's at N workers, on the same link alpha.

    `ring` defaults to `setting` run as multi_worker_mirrored. The ratio step_ps/step_ring is
    scanned on a log grid from 1 kbit/s to 10 Tbit/s; the first crossing is refined with
    brentq on log10(bandwidth). None when even 10 Tbit/s leaves PS more than `tolerance` behind:
    what bandwidth does not shrink (the ps apply, per-message alpha) keeps it there.
    """
    if setting.strategy != "parameter_server":
        raise ValueError("bandwidth_match compares a parameter-server setting with ring all-reduce")
    ring = ring or dataclasses.replace(setting, strategy="multi_worker_mirrored")

    def excess(log_bps: float) -> float:
        beta = 10 ** log_bps / 8
        return step_s(with_beta(setting, beta), n) / step_s(with_beta(ring, beta), n) - (1 + tolerance)

    grid = np.linspace(math.log10(BOTTOM_BPS), math.log10(TOP_BPS), GRID)
    values = np.array([excess(x) for x in grid])
    within = np.flatnonzero(values <= 0)
    limit = f"{tolerance:.0%}"
    if within.size == 0:
        beta = TOP_BPS / 8
        ps, rg = step_s(with_beta(setting, beta), n), step_s(with_beta(ring, beta), n)
        fixed = eq.apply_share_s(setting.ps_apply_s, setting.num_ps)
        return Match(None, f"no bandwidth up to {rate_text(TOP_BPS)} brings the ps within {limit} of ring "
                           f"all-reduce at N={n}: there its step is {ps * 1e3:.4g} ms against {rg * 1e3:.4g} ms, "
                           f"held up by what bandwidth does not shrink (ps apply {fixed * 1e3:.4g} ms, "
                           f"per-message latency {setting.link.alpha_s * 1e3:.4g} ms)")
    first = int(within[0])
    if first == 0:
        return Match(BOTTOM_BPS, f"within {limit} of ring all-reduce at N={n} already at {rate_text(BOTTOM_BPS)}, "
                                 f"the lowest bandwidth tried")
    from scipy.optimize import brentq  # here: scipy takes a second to import

    root = brentq(excess, grid[first - 1], grid[first], xtol=1e-10)
    return Match(10 ** root, f"from {rate_text(10 ** root)} the ps step is within {limit} of ring all-reduce at N={n}")
