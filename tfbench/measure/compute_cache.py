"""The compute of one worker step measured on this machine, for --compute=emulated --compute_ms=0:
cached per machine (tfbench.measure.machine's key) and setting, as the peaks are, so that a sweep
measures it once (tfbench.app.compute_time measures it).

A setting is what decides a worker's forward and backward pass: the model's graph (the
workload's key), every flag the workload reads, mode, batch per replica, precision and the cores
a worker has. An entry holds the milliseconds (the median of the measured steps' batch in hand to
every gradient computed, as the step split's compute), their spread, when and at which commit it
was measured and the run that measured it.
"""
from __future__ import annotations

import os
from typing import Optional

from tfbench.config.choices import EMULATED_COMPUTE
from tfbench.measure import json_cache, machine

CACHE_ENV = "TFBENCH_COMPUTE_CACHE"  # overrides the cache file (tests)


def cache_path() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "tfbench", "compute.json")


def setting(config, cores: int) -> str:
    """E.g. 'lenet|16px|10 classes|NHWC train batch=8 fp32 cores=1'."""
    workload = config.workload
    flags = " ".join(f"{name}={getattr(config, name)}" for name in workload.reads if name != "data_dir")
    return " ".join(part for part in (workload.key(config), config.mode, f"batch={config.batch_size}",
                                      config.precision, flags, f"cores={cores}") if part)


def key(config, cores: int) -> str:
    """The cache's key: this machine's, then the setting's."""
    return f"{machine.key()} || {setting(config, cores)}"


def load(config, cores: int) -> Optional[dict]:
    """This machine's entry for the setting, or None when it was never measured."""
    return json_cache.read(cache_path()).get(key(config, cores))


def store(config, cores: int, entry: dict) -> str:
    """Adds the entry (other machines' and settings' entries kept)."""
    path = cache_path()
    json_cache.write(path, key(config, cores), entry)
    return path


def record(config, cores: int) -> dict:
    """What a run's records say of its compute: real, or emulated with the wait and where it came
    from (the cached measurement it equals, else given)."""
    if not config.emulated_compute:
        return {"mode": "real"}
    entry = load(config, cores)
    measured = entry is not None and abs(entry["ms"] - config.compute_ms) < 1e-9
    source = (f"measured on this machine by a real run of the same setting ({entry['measured_at']}, tfbench "
              f"{entry.get('tfbench_commit') or 'unknown'}: median of {entry['steps']} steps, p10-p90 "
              f"{entry['p10_ms']:.1f}-{entry['p90_ms']:.1f} ms), cached" if measured else "given (--compute_ms)")
    return {"mode": EMULATED_COMPUTE, "ms_per_worker_step": config.compute_ms, "source": source,
            "setting": setting(config, cores)}
