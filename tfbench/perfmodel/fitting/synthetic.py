"""Runs made by the model itself, to calibrate its intervals where the truth is known: a sweep
shaped like `make model` (a synchronous parameter server on a host of its own and ring all-reduce,
1-3 workers, links of 50, 100 and 200 Mbit/s, LeNet at 64 px) from known parameters, each run's
rate scattered log-normally by sigma; fitted on the runs with fewer workers than HOLD_OUT, it
predicts fresh runs with HOLD_OUT workers, and calibrate() counts how many fall inside their
intervals and how often each fitted parameter's range holds its true value
(`python -m tools.model calibrate`, tests/test_perfmodel_intervals.py).
"""
from __future__ import annotations

import math
import statistics
from typing import Dict, List, Optional

import numpy as np

from tfbench.perfmodel.dense import equations as eq
from tfbench.perfmodel.fitting import fit as fit_lib
from tfbench.perfmodel import intervals
from tfbench.perfmodel.dense import prediction, sync_step
from tfbench.perfmodel.fitting import spread
from tfbench.perfmodel.fitting.observations import Observation

W, MS_PER_IMAGE, BATCH, HOLD_OUT = 2.12e6, 1.25, 32, 3
LINKS = {"50mbit": (3e-4, 4.9e7), "100mbit": (2e-4, 9.7e7), "200mbit": (1.5e-4, 1.9e8)}  # alpha s, beta bits/s
TRUE = {"parameter_server": {"overhead_s": 0.030, "share": 1.0, "chi": 0.4, "apply_s": 0.006},
        "multi_worker_mirrored": {"overhead_s": 0.008, "share": 0.9, "chi": 0.0, "apply_s": 0.0}}
# the numbers of a parameters document the sweep's fit must recover, and their true values
PARAMETERS = {("overhead_s", "parameter_server_sync", "value_s"): 0.030,
              ("duplex_chi", "parameter_server_sync", "value"): 0.4,
              ("overhead_s", "multi_worker_mirrored", "value_s"): 0.008,
              ("link_efficiency", "multi_worker_mirrored", "value"): 0.9}


def setting(strategy: str, link: str) -> prediction.Setting:
    t, (alpha, beta) = TRUE[strategy], LINKS[link]
    return prediction.Setting(strategy=strategy, w_bytes=W, compute_s=MS_PER_IMAGE * BATCH / 1e3, batch_size=BATCH,
                              link=eq.Link(alpha, t["share"] * beta / 8), num_ps=1, ps_placement=eq.SEPARATE,
                              ps_sync=strategy == "parameter_server", ps_apply_s=t["apply_s"],
                              overhead_s=t["overhead_s"], extra=sync_step.Extra(chi=t["chi"]))


def observation(strategy: str, n: int, link: str, factor: float = 1.0) -> Observation:
    """The run the true model gives, its times multiplied by `factor`."""
    p = prediction.point(setting(strategy, link), n)
    alpha, beta = LINKS[link]
    ps = strategy == "parameter_server"
    return Observation(
        run_id=f"{strategy[:4]}-{n}-{link}", strategy=strategy, num_workers=n, num_ps=1 if ps else 0,
        ps_placement=eq.SEPARATE, ps_sync=ps, batch_size=BATCH, model="lenet", mode="train", precision="fp32",
        image_size=64, num_classes=10, cores=1, link=link, link_rate_bps=float(link[:-4]) * 1e6, alpha_s=alpha,
        beta_bps=beta, w_bytes=W, step_s=p.step_s, images_per_sec=p.images_per_sec, compute_s=p.compute_s,
        communication_s=p.communication_s, apply_s=p.apply_s, compute_measured=not ps,
        bytes_per_step={}).scaled(factor)


def sweep(sigma: float = 0.0, rng: Optional[np.random.Generator] = None) -> List[Observation]:
    """Every strategy at 1-3 workers on every link, each run's rate scattered by exp(sigma Z)."""
    rng = rng or np.random.default_rng(0)
    return [observation(s, n, link, math.exp(-sigma * rng.standard_normal())) for s in TRUE for n in (1, 2, HOLD_OUT)
            for link in LINKS]


def calibrate(sigma: float, sweeps: int, replicates: Optional[int] = None, seed: int = 0) -> dict:
    """Over `sweeps` synthetic sweeps: the coverage of fresh held-out runs by their intervals
    (intervals.coverage), the scatter each fit found, and how many sweeps' 90% ranges over the
    refits held each true parameter."""
    rng = np.random.default_rng(seed)
    pairs, scales, held = [], [], {path: 0 for path in PARAMETERS}
    for i in range(sweeps):
        training = [o for o in sweep(sigma, rng) if o.num_workers < HOLD_OUT]
        data, found = fit_lib.with_spread(training, replicates=replicates, seed=seed + i)
        scales.append(found.scatter.scale)
        for o in (o for o in sweep() if o.num_workers == HOLD_OUT):
            fresh = o.images_per_sec * math.exp(sigma * rng.standard_normal())
            pairs.append((fresh, found.interval(lambda d, o=o: fit_lib.predicted_rate(d, o))))
        ranges = {path: (low, high) for path, low, high in spread.parameter_ranges(data)}
        for path, value in PARAMETERS.items():
            low, high = ranges.get(path, (math.nan, math.nan))
            held[path] += low <= value <= high
    return {"coverage": intervals.coverage(pairs), "scale": statistics.median(scales), "parameters": held,
            "sweeps": sweeps}


def lines(found: dict, sigma: float) -> List[str]:
    """What calibrate() found, as the lines `tools.model calibrate` prints."""
    params: Dict[tuple, int] = found["parameters"]
    return [f"synthetic sweeps: {found['sweeps']}, each run's rate scattered by {sigma:.1%} (log-normal), fitted on "
            f"N < {HOLD_OUT}, predicting fresh runs at N = {HOLD_OUT}",
            intervals.coverage_line(found["coverage"]),
            f"the scatter the fits found: median {found['scale']:.1%} (true {sigma:.1%})",
            "true parameters inside their 90% range over the refits: " + "; ".join(
                f"{'.'.join(path)} {count}/{found['sweeps']}" for path, count in params.items())]
