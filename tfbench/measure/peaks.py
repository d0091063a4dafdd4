"""The machine's measured compute peak, cached so that runs never re-measure it.

`python -m tools.bench.peak` measures dense matrix multiplication (GEMM) throughput at fp32 and bf16
(and fp16 on a GPU), on all cores and on one core, and stores it here under this machine's key
(tfbench.measure.machine: CPU model, CPUs, GPUs, TensorFlow version). Runs read the cache (no
TensorFlow needed) into environment.json and divide their achieved FLOP/s by the peak of the
cores they had. When nothing was measured the record says so; a peak is never guessed.

A peak measured while other processes used the cores is too low, and every fraction of it too
high. So tools.bench.peak records the conditions (the 1-minute load average before measuring, the
cores other processes used while it measured), refuses to store a peak taken on a busy machine
(busy_reason) unless forced, and every place that divides by the peak prints its age and those
conditions (describe); a fraction above 1 says that the peak, not the run, is wrong.
"""
from __future__ import annotations

import os
import time
from typing import Optional

from tfbench.framework import distribution
from tfbench.measure import json_cache, machine

CACHE_ENV = "TFBENCH_PEAK_CACHE"  # overrides the cache file (tests)
UNKNOWN = "unknown: no peak measured on this machine; run `python -m tools.bench.peak`"
# A machine is too busy for a peak when the 1-minute load average before measuring, or the
# cores other processes used while measuring, exceed this share of its cores.
QUIET_SHARE = 0.25
WRONG = ("above 1: the peak is too low (measured on a loaded machine?), not the run too fast; "
         "re-measure with `python -m tools.bench.peak --refresh` on a quiet machine")


def cache_path() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "tfbench", "peak.json")


def tf_version() -> str:
    return distribution.tensorflow_version()


def load(key: Optional[str] = None) -> Optional[dict]:
    """The cached peak of this machine (tfbench.measure.machine's key), or None when it was never measured."""
    return json_cache.read(cache_path()).get(key or machine.key())


def store(entry: dict, key: Optional[str] = None) -> str:
    path = cache_path()
    json_cache.write(path, key or machine.key(), entry)
    return path


def for_environment() -> dict:
    """What environment.json records about the peak: the measurement, or why there is none."""
    entry = load()
    if entry is None:
        return {"status": UNKNOWN}
    return dict(entry, status="measured")


def peak_flops(peak: Optional[dict], precision: str, cores: int, device: str = "cpu") -> Optional[float]:
    """FLOP/s a task with `cores` cores can reach at `precision`, or None when unknown.

    One core and all cores are measured; in between, one core's peak times the cores, capped at
    the all-core peak (GEMM scales close to linearly on a CPU's cores).
    """
    if not peak or peak.get("status", "measured") != "measured":
        return None
    if device == "gpu" and peak.get("gpu"):
        value = (peak["gpu"].get(precision) or {}).get("flops_per_s")
        return float(value) if value else None
    entry = (peak.get("cpu") or {}).get(precision)
    if not entry:
        return None
    total = int(entry.get("cores", 0) or 0)
    all_cores, one_core = entry.get("all_cores_flops_per_s"), entry.get("one_core_flops_per_s")
    if cores <= 0 or cores >= total:
        return all_cores
    if one_core is None:
        return all_cores * cores / total if all_cores else None
    return min(one_core * cores, all_cores) if all_cores else one_core * cores


def busy_reason(load_1m: float, other_cores: Optional[float], cores: int) -> Optional[str]:
    """Why the machine is too busy for a peak, or None when it was quiet enough."""
    limit = QUIET_SHARE * cores
    if load_1m > limit:
        return f"1-minute load average {load_1m:.2f} on {cores} cores, more than {limit:g}"
    if other_cores is not None and other_cores > limit:
        return f"other processes used {other_cores:.2f} of {cores} cores while it measured, more than {limit:g}"
    return None


def describe(entry: Optional[dict], at: Optional[float] = None) -> str:
    """Where a peak is used: when it was measured (and how long before `at`, a Unix time) and
    under which load; old entries, which recorded only the load just after, say so."""
    if not entry or entry.get("status", "measured") != "measured":
        return UNKNOWN
    when = entry.get("measured_at", "")
    text = f"GEMM peak measured {when.replace('T', ' ').replace('Z', ' UTC')}".rstrip()
    try:
        age_s = (at if at is not None else time.time()) - _utc_seconds(when)
        text += f" ({_age(age_s)} before this run)" if at is not None else f" ({_age(age_s)} ago)"
    except ValueError:
        pass
    conditions = entry.get("conditions")
    if conditions:
        text += (f", 1-minute load average {conditions['load_average_1m_before']:.2f} before, other processes "
                 f"using {conditions['other_cpu_cores']:.2f} of {conditions['cores']} cores meanwhile")
        if conditions.get("forced"):
            text += f" (stored with --force: {conditions.get('busy', 'busy')})"
    elif entry.get("load_average_1m_after") is not None:
        text += (f"; conditions not recorded (1-minute load average {entry['load_average_1m_after']:.2f} just after, "
                 f"its own load included): `python -m tools.bench.peak --refresh` records them")
    return text


def _utc_seconds(stamp: str) -> float:
    import calendar

    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


def _age(seconds: float) -> str:
    if seconds < 0:
        return "0 s"
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
