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

# {strategy key: {parameter of predict's facts: (lowest, highest) fitted}}: fits of three or more runs
SHARES: Dict[str, Dict[str, Tuple[float, float]]] = {
    "multi_worker_mirrored": {"share": (0.77, 0.92)},
    "horovod": {"share": (0.90, 0.94)},
    "parameter_server_sync": {"chi": (0.62, 0.83)},
}
SOURCE = ("fitted on 2026-11-27 by make model (sweeps/model-20261127-104509 at d6c2ade: MWMS share 0.92, synchronous "
          "ps chi 0.62) and make model-scale (sweeps/model-scale-20261127-100614 at 7a3f2cf and "
          "-110332 at 89b2f4c: MWMS 0.77 and 0.77, Horovod 0.90 and 0.94, synchronous ps chi 0.64 and 0.68 with one "
          "ps on its own host, 0.77 and 0.83 with k = N collocated)")
NAMES = {"share": "share of beta the protocol gets", "chi": "duplex chi"}


def ranges(key: str) -> Dict[str, Tuple[float, float]]:
    """{parameter: (lowest, highest) measured} for a strategy key ({} if never fitted)."""
    return dict(SHARES.get(key, {}))
