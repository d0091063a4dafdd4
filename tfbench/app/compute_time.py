"""--compute=emulated --compute_ms=0: the wait is the compute a worker's step takes on this machine,
measured once by a short real run of the same setting and cached (tfbench.measure.compute_cache).

The measuring run is `python -m tfbench` with the default strategy, one task pinned to as many
cores as each worker of the run has, the same model, workload flags, batch, mode and precision,
and real compute: its compute per step is each measured step's batch in hand to every gradient
computed (the step split's compute: forward and backward, not the update, which an emulated step
still runs), and the wait is their median. It runs in a directory of the cache's, never among the
run's own (a sweep reads every run below its directory).
"""
from __future__ import annotations

import datetime
import os
import statistics
import sys
import time

import numpy as np

from tfbench.app.child_run import command_flags, last_line, run_command
from tfbench.config import RunConfig
from tfbench.measure import compute_cache, environment
from tfbench.results import records

WARMUP_STEPS, STEPS = 3, 10
TIMEOUT_S = 900.0
# What the measuring run copies of the run (its workload's own flags too): what a worker's forward
# and backward pass depends on.
COPIED = ("model", "mode", "batch_size", "precision", "seed", "learning_rate", "device", "placement",
          "num_intra_threads", "num_inter_threads")


class ComputeUnmeasured(RuntimeError):
    """The measuring run failed (one line: the run and its error)."""


def worker_cores(config, plan) -> int:
    """Cores each worker of the plan has (per local device for a task split over several)."""
    workers = [t for t in plan.tasks if t.role == "worker"] or list(plan.tasks)
    cores = min(len(t.cores) for t in workers) or (os.cpu_count() or 1)
    return max(1, cores // max(1, config.effective_num_local_devices or 1))


def measuring_config(config, cores: int, logdir: str, run_id: str) -> RunConfig:
    names = COPIED + tuple(n for n in config.workload.reads if n != "data_dir")
    return RunConfig(**{n: getattr(config, n) for n in names}).replace(
        cores_per_worker=cores, num_warmup_steps=WARMUP_STEPS, num_steps=STEPS, logdir=logdir, run_id=run_id,
        monitor=False)


def compute_ms_of(task: dict) -> list:
    """Each measured step's compute (batch in hand to every gradient computed), in ms."""
    return [(c - b) * 1e3 for c, b in zip(task.get("step_computed_wall") or [], task.get("step_input_wall") or [])
            if c > 0]


def measure(config, cores: int) -> dict:
    """Runs the measuring run and returns the cache entry; ComputeUnmeasured when it fails."""
    logdir = os.path.join(os.path.dirname(compute_cache.cache_path()), "compute-runs")
    os.makedirs(logdir, exist_ok=True)
    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{config.model}"
    measuring = measuring_config(config, cores, logdir, run_id)
    print(f"tfbench: --compute=emulated: measuring this machine's compute per worker step with a real run "
          f"({compute_cache.setting(config, cores)}) -> {os.path.join(logdir, run_id)}", flush=True)
    out, err = (os.path.join(logdir, f"{run_id}.{kind}") for kind in ("out", "err"))
    code = run_command([sys.executable, "-m", "tfbench", *command_flags(measuring)], out, err, TIMEOUT_S)
    tasks = [r for r in records.read(os.path.join(logdir, run_id, records.RESULTS_FILE)) if r.get("kind") == "task"]
    steps = compute_ms_of(tasks[0]) if tasks else []
    if code != 0 or not steps:
        raise ComputeUnmeasured(f"the run measuring the compute ({os.path.join(logdir, run_id)}) failed: "
                                f"{last_line(err) or f'exit code {code}'}")
    return {"ms": statistics.median(steps), "p10_ms": float(np.percentile(steps, 10)),
            "p90_ms": float(np.percentile(steps, 90)), "steps": len(steps),
            "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tfbench_commit": environment.collect().get("tfbench_commit"), "run": os.path.join(logdir, run_id)}


def resolve(config, plan):
    """The config with the wait in ms: as given, or this machine's measured compute (from the
    cache, else measured now and cached)."""
    if not config.emulated_compute or config.compute_ms > 0:
        return config
    cores = worker_cores(config, plan)
    entry = compute_cache.load(config, cores)
    if entry is None:
        entry = measure(config, cores)
        path = compute_cache.store(config, cores, entry)
        print(f"tfbench: compute per worker step {entry['ms']:.1f} ms (median of {entry['steps']} steps, "
              f"p10-p90 {entry['p10_ms']:.1f}-{entry['p90_ms']:.1f}); cached in {path}", flush=True)
    return config.replace(compute_ms=entry["ms"])


def describe(config, plan) -> str:
    """What a dry run says of emulated compute (nothing for real compute): the given wait, the cached one, or that the run
    will measure it first."""
    if not config.emulated_compute:
        return ""
    if config.compute_ms > 0:
        return f"compute: emulated, a wait of {config.compute_ms:g} ms per worker step (given)"
    cores = worker_cores(config, plan)
    entry = compute_cache.load(config, cores)
    if entry is not None:
        return (f"compute: emulated, a wait of {entry['ms']:.1f} ms per worker step (measured on this machine "
                f"{entry['measured_at']}, cached)")
    return (f"compute: emulated; the run first measures this machine's compute per worker step with a real run "
            f"of {WARMUP_STEPS} + {STEPS} steps ({compute_cache.setting(config, cores)})")
