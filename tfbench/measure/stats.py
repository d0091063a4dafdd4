"""Step-time statistics, exactly as docs/definitions.md defines them."""
from __future__ import annotations

import math
from typing import Dict, List, Sequence

import numpy as np

# tf_cnn_benchmarks' robust spread: MAD scaled to a normal distribution's standard deviation.
MAD_TO_SIGMA = 1.4826


def ci95_half_width(values: Sequence[float]) -> float:
    """Half-width of the 95% confidence interval of the mean (Student t); nan below 2 values."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return float("nan")
    # Student t's quantile from scipy.special (stdtrit, what scipy.stats.t.ppf computes): importing
    # scipy.stats costs every run's launcher 0.4-1 s before it can print the table, scipy.special 0.14.
    from scipy.special import stdtrit

    return float(stdtrit(v.size - 1, 0.975) * v.std(ddof=1) / math.sqrt(v.size))


def step_time_stats(step_times_s: Sequence[float]) -> Dict[str, float]:
    """Mean, median, p90, sample std, 95% CI half-width of the mean (Student t) and jitter.

    The samples must be independent: one per global step of the cluster (see global_steps),
    never every rank's copy of the same synchronous step."""
    t = np.asarray(step_times_s, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no measured steps")
    n = t.size
    mean = float(t.mean())
    std = float(t.std(ddof=1)) if n > 1 else 0.0
    ci95 = ci95_half_width(t)
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


def global_steps(starts: Sequence[Sequence[float]], durations: Sequence[Sequence[float]]) -> List[float]:
    """One time per global step of a synchronous cluster, from every rank's own view of it.

    Step k of the cluster runs from the first rank's start of step k to the last rank's end of
    step k (ranks disagree by their skew and by how long each waited in the collective).
    Every rank runs the same steps; ranks with fewer recorded steps are a bug upstream."""
    counts = {len(s) for s in starts} | {len(d) for d in durations}
    if len(counts) != 1:
        raise ValueError(f"ranks recorded different numbers of synchronous steps: {sorted(counts)}")
    out = []
    for k in range(counts.pop()):
        first = min(s[k] for s in starts)
        last = max(s[k] + d[k] for s, d in zip(starts, durations))
        out.append(last - first)
    return out


def between_runs(values: Sequence[float]) -> Dict[str, float]:
    """Mean of the repeats' values and its 95% CI (Student t over run means): the interval of
    a point measured more than once (within-run intervals ignore run-to-run variance)."""
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=np.float64)
    mean = float(v.mean()) if v.size else float("nan")
    half = ci95_half_width(v)
    return {"count": int(v.size), "mean": mean, "ci95": half,
            "low": mean - half if math.isfinite(half) else float("nan"),
            "high": mean + half if math.isfinite(half) else float("nan")}


def examples_per_sec(examples_per_step: int, step_times_s: Sequence[float]) -> float:
    """Task rate: examples per step x measured steps / sum of measured step times."""
    total = float(np.sum(step_times_s))
    return examples_per_step * len(step_times_s) / total if total > 0 else float("nan")


def scaling_efficiency(rate_n: float, n: int, rate_1: float) -> float:
    """Cluster rate at N / (N x the rate at 1), same per-replica batch and cores per
    worker (callers check both: tools.report.aggregate refuses otherwise)."""
    return rate_n / (n * rate_1) if rate_1 > 0 and n > 0 else float("nan")
