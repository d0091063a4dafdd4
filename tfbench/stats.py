"""Step-time statistics, exactly as DESIGN.md defines them."""
from __future__ import annotations

import math
from typing import Dict, Sequence

import numpy as np

# tf_cnn_benchmarks' robust spread: MAD scaled to a normal distribution's standard deviation.
MAD_TO_SIGMA = 1.4826


def step_time_stats(step_times_s: Sequence[float]) -> Dict[str, float]:
    """Mean, median, p90, sample std, 95% CI half-width of the mean (Student t) and jitter."""
    t = np.asarray(step_times_s, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no measured steps")
    from scipy import stats as scipy_stats  # imported on first use: it costs the CLI ~1 s at start

    n = t.size
    mean = float(t.mean())
    std = float(t.std(ddof=1)) if n > 1 else 0.0
    ci95 = float(scipy_stats.t.ppf(0.975, n - 1) * std / math.sqrt(n)) if n > 1 else float("nan")
    median = float(np.median(t))
    return {
        "count": int(n),
        "mean_s": mean,
        "median_s": median,
        "p90_s": float(np.percentile(t, 90)),
        "std_s": std,
        "ci95_s": ci95,
        "jitter_s": float(MAD_TO_SIGMA * np.median(np.abs(t - median))),
        "min_s": float(t.min()),
        "max_s": float(t.max()),
    }


def images_per_sec(images_per_step: int, step_times_s: Sequence[float]) -> float:
    """Task rate: images per step x measured steps / sum of measured step times."""
    total = float(np.sum(step_times_s))
    return images_per_step * len(step_times_s) / total if total > 0 else float("nan")


def scaling_efficiency(rate_n: float, n: int, rate_1: float) -> float:
    """Cluster images/sec at N / (N x images/sec at 1), same per-replica batch."""
    return rate_n / (n * rate_1) if rate_1 > 0 and n > 0 else float("nan")
