"""What tfbench's own fits measured of the things a prediction with no fit behind it cannot know:
each protocol's share of the link, a synchronous parameter server's duplex chi, each strategy's
overhead per step, the ps's apply per byte, the goodput of the links the shares were fitted on,
and how far a new run scatters about a fit. tfbench.perfmodel.fitting.nofit makes a no-fit
prediction's point and range from them.

Every value is one fit's, on emulated hosts of this machine (docs/performance-model.md): `make
model` (sweeps/model-20261127-104509 at d6c2ade) and `make model-scale` (sweeps/model-scale-
20261127-100614 at 7a3f2cf and -110332 at 89b2f4c), all of 2026-11-27. A share is of the beta the
links' probes measured; the probes measured this share of the configured rate (GOODPUT). An
overhead the fit put "under 1 ms" counts as 1 ms.
"""
from __future__ import annotations

from typing import Dict, Tuple

# {strategy key: {parameter: the values fits found}}
FITTED: Dict[str, Dict[str, Tuple[float, ...]]] = {
    "multi_worker_mirrored": {"share": (0.92, 0.77, 0.77), "overhead_s": (0.0, 0.001)},
    "horovod": {"share": (0.90, 0.94), "overhead_s": (0.001,)},
    # a parameter server's fits hold the share at 1 and fit chi: one ps on its own host 0.64 and 0.68, k = N
    # collocated 0.77 and 0.83, make model's 0.62; overheads 0 (make model), 13.0 ms (one ps on its own host)
    # and under 1 ms (k = N collocated)
    "parameter_server_sync": {"share": (1.0,), "chi": (0.62, 0.64, 0.68, 0.77, 0.83),
                              "overhead_s": (0.0, 0.013, 0.001)},
}
# probed beta / configured rate of the emulated links the shares were fitted on: 50, 100, 200 and 5 Mbit/s
GOODPUT: Tuple[float, ...] = (47.3 / 50, 93.4 / 100, 185.6 / 200, 4.77 / 5)
# seconds a synchronous ps took to apply one update, per byte of |w|: make model's 6.9 ms for 2.12 MB
APPLY_S_PER_BYTE: Tuple[float, ...] = (6.9e-3 / 2.12e6,)
# a new run's scatter about its fit (spread.py: the robust scale of the fitted runs' residuals adjusted for
# leverage, as a relative error): make model-scale's sweeps -100614 (6.9%) and -110332 (3.0%) of 2026-11-27, and
# its sweeps with every point run twice, on an Intel Xeon (5.2%, d458f42) and an AMD EPYC (4.6%, 27366fb)
RUN_SCATTER: Tuple[float, ...] = (0.069, 0.030, 0.052, 0.046)
# strategies never fitted take the values of the protocol they share: an asynchronous ps talks gRPC to
# its ps as the synchronous one does; the binomial tree is an all-reduce, as MWMS and Horovod; the
# hybrid runs Horovod's ring for its dense gradients and the synchronous ps's pulls and pushes for its
# rows, so it takes the values of both
LIKE: Dict[str, Tuple[str, ...]] = {"parameter_server_async": ("parameter_server_sync",),
                                    "tree": ("multi_worker_mirrored", "horovod"),
                                    "allreduce": ("multi_worker_mirrored", "horovod"),
                                    "hybrid": ("horovod", "parameter_server_sync")}
SOURCE = ("fitted on 2026-11-27 by make model (sweeps/model-20261127-104509 at d6c2ade) and make model-scale "
          "(sweeps/model-scale-20261127-100614 at 7a3f2cf and -110332 at 89b2f4c): MWMS share 0.92, 0.77, 0.77; "
          "Horovod 0.90, 0.94; synchronous ps chi 0.62, 0.64, 0.68, 0.77, 0.83; overheads 0-13 ms; ps apply 6.9 ms "
          "per 2.12 MB; links' goodput 0.93-0.95 of their rate; a new run's scatter about a fit 3.0-6.9% (make model-scale "
          "of 2026-11-27, and with every point run twice at d458f42 and 27366fb)")
NAMES = {"share": "share of the link's rate the protocol gets", "chi": "duplex chi", "overhead_s": "overhead s",
         "apply_s": "ps apply s", "phi": "overlap phi"}


def values(key: str, name: str) -> Tuple[float, ...]:
    """What the fits of `key` (or of the strategies it is like) found for `name`; () if none."""
    found = FITTED.get(key, {}).get(name)
    if found:
        return found
    return tuple(v for like in LIKE.get(key, ()) for v in FITTED.get(like, {}).get(name, ()))


def ranges(key: str) -> Dict[str, Tuple[float, float]]:
    """{parameter: (lowest, highest) fitted} of a strategy key's shares ({} if never fitted)."""
    return {name: (min(v), max(v)) for name in ("share", "chi") for v in [values(key, name)] if v}
