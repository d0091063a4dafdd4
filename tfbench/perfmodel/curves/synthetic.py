"""Runs and scaling curves made by the model itself, to check the level of the 90% intervals that
are not a fit on tfbench runs (those: tfbench.perfmodel.fitting.synthetic): the recommender's step model
(tfbench.perfmodel.sparse.recommender), fitted on N <= 4 and judged at 8-16, and a measured cluster curve
(tfbench.perfmodel.curves.clusterspread), fitted on 1-16 GPUs and judged at 32-128. Each run's or point's
rate is scattered log-normally by sigma about the truth; `python -m tools.model calibrate` counts
how many fresh held-out runs fall inside their intervals.
"""
from __future__ import annotations

import dataclasses
import math
from typing import List, Optional

import numpy as np

from tfbench.perfmodel import intervals
from tfbench.perfmodel.curves import clusterfit, clusterspread
from tfbench.perfmodel.dense import shards
from tfbench.perfmodel.sparse import recommender as rec

# the recommender of `make dlrm-scale` (8 tables x 20,000 rows x 16 dims, batch 512, Zipf 0.6) on 10 Mbit/s
REC_SETTING = rec.Setting(table_rows=(20000,) * 8, embedding_dim=16, ids_per_feature=1, zipf_alpha=0.6,
                          batch_size=512, dense_bytes=4.0 * 10_000)
REC_LINK = 10e6 / 8
REC_TRUE = {"parameter_server": (rec.PS, rec.Fit("parameter_server", 0.060, 0.002, 0.030, 0.80, ())),
            "multi_worker_mirrored": (rec.ALL_GATHER, rec.Fit("multi_worker_mirrored", 0.050, 0.001, 0.010, 0.85, ()))}
REC_FITTED, REC_HELD = (1, 2, 4), (8, 12, 16)
# a cluster of 20 variables (the largest a tenth of |w|), tf_cnn_benchmarks' parameter_server mode, one GPU
# per node, compute-bound at small N and bound by the busiest ps host at large N
CURVE_VARIABLES = tuple(shards.Variable(f"v{i}", (250_000 * (1 + i % 4),)) for i in range(19)) + (
    shards.Variable("logits", (2_000_000,)),)
CURVE_TRUE = clusterfit.Params(per_image_s=7e-3, beta=6e8, phi=0.1, per_message_s=2e-6)
CURVE_CEILING = 2e9
CURVE_FITTED, CURVE_HELD = (1, 2, 4, 8, 16), (32, 64, 128)


def _scattered(value: float, sigma: float, rng: np.random.Generator) -> float:
    return value * math.exp(sigma * rng.standard_normal())


def recommender_runs(sigma: float, rng: np.random.Generator, counts=REC_FITTED) -> List[rec.Observation]:
    """Each strategy's runs at `counts` workers, their steps (and compute) scattered by exp(sigma Z)."""
    out = []
    for strategy, (kind, truth) in REC_TRUE.items():
        for n in counts:
            step = truth.step_s(kind, n, REC_SETTING, REC_LINK)
            factor = math.exp(sigma * rng.standard_normal())
            out.append(rec.Observation(f"{strategy}-{n}", kind, strategy, n, step * factor,
                                       max(0.0, truth.c0 + truth.c1 * n) * factor, REC_LINK, REC_SETTING))
    return out


def calibrate_recommender(sigma: float, sweeps: int, seed: int = 0) -> dict:
    """Coverage of fresh held-out runs (N = 8-16) by the 90% intervals of fits on N <= 4."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(sweeps):
        found = recommender_runs(sigma, rng)
        fits = rec.fit_all(found, max(REC_FITTED))
        spreads = rec.spreads(found, fits, max(REC_FITTED))
        for o in recommender_runs(sigma, rng, REC_HELD):
            pairs.append((o.rate, spreads[o.strategy].interval(fits[o.strategy], o.kind, o.n, REC_SETTING, REC_LINK)))
    return intervals.coverage(pairs)


def curve_points(sigma: float, rng: Optional[np.random.Generator], counts) -> List[clusterfit.Point]:
    cluster = clusterfit.Cluster(CURVE_VARIABLES)
    out = []
    for g in counts:
        q = clusterfit.Point(gpus=g, devices_per_node=1, num_ps=max(1, g // 4), mode="parameter_server")
        rate = cluster.rate(q, CURVE_TRUE)
        out.append(dataclasses.replace(q, images_per_sec=_scattered(rate, sigma, rng) if rng is not None else rate))
    return out


def calibrate_curve(sigma: float, sweeps: int, seed: int = 0) -> dict:
    """Coverage of fresh held-out points (32-128 GPUs) by the 90% intervals of fits on 1-16."""
    rng = np.random.default_rng(seed)
    cluster = clusterfit.Cluster(CURVE_VARIABLES)
    pairs = []
    for _ in range(sweeps):
        prof = clusterspread.profile(cluster, curve_points(sigma, rng, CURVE_FITTED), CURVE_CEILING)
        pairs += [(q.images_per_sec, prof.interval(q)) for q in curve_points(sigma, rng, CURVE_HELD)]
    return intervals.coverage(pairs)
