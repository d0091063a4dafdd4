"""The protocol shares tfbench has measured, for a prediction with no fit behind it.

`predict` without a parameters file assumes every protocol gets the whole line rate (share of
beta 1) and a synchronous parameter server's two link directions overlap as --duplex_chi says
(0: fully); measured protocols do not. Such a prediction's interval is the range of predictions
over the values below (and the assumed ones): each the range of what the fits of `make model`
and `make model-scale` found on emulated hosts of this machine (docs/performance-model.md), so
that the optimism of the assumption is stated, not hidden. A strategy missing here was never
fitted: its interval is its point.
"""
from __future__ import annotations

from typing import Dict, Tuple

# {strategy key: {parameter of predict's facts: (lowest, highest) fitted}}
SHARES: Dict[str, Dict[str, Tuple[float, float]]] = {
    "multi_worker_mirrored": {"share": (0.85, 0.92)},
    "horovod": {"share": (0.88, 0.88)},
    "parameter_server_sync": {"chi": (0.53, 0.72)},
}
SOURCE = ("fitted by make model (sweeps/model-20261125-220513, measured 2026-11-25 at 513bea1: MWMS share 0.92, "
          "synchronous ps chi 0.68) and make model-scale (sweeps/model-scale-20261125-214302, 2026-11-25 at 70692ed: "
          "MWMS 0.85, Horovod 0.88, synchronous ps chi 0.53 with one ps on its own host and 0.72 with k = N collocated)")
NAMES = {"share": "share of beta the protocol gets", "chi": "duplex chi"}


def ranges(key: str) -> Dict[str, Tuple[float, float]]:
    """{parameter: (lowest, highest) measured} for a strategy key ({} if never fitted)."""
    return dict(SHARES.get(key, {}))
