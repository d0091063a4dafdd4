"""Can this machine start the run? Checks of what a launcher needs here (Horovod, root, Slurm's
commands, network namespaces), made after the flags are valid and before anything is spawned
or written, each ending with one line (ConfigError); cluster.launchers.registry says which
checks each launcher kind needs."""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys

from cluster.net import netns
from tfbench.config.errors import ConfigError


def check_horovod() -> None:
    horovodrun = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    if importlib.util.find_spec("horovod") is None or not os.path.exists(horovodrun):
        raise ConfigError("--strategy=horovod needs Horovod, which is not installed; run `make horovod` (see BUILD.md)")


def check_elastic_root() -> None:
    if os.geteuid() != 0:
        raise ConfigError("--horovod_elastic needs root: each rank gets a loopback address of its own in a private "
                          "network namespace (README: Faults and recovery)")


def check_slurm() -> None:
    missing = [c for c in ("sbatch", "squeue", "scancel", "srun") if shutil.which(c) is None]
    if missing:
        raise ConfigError(f"--launcher=slurm needs Slurm's {', '.join(missing)} on PATH (see README: Slurm)")


def check_node_slurm() -> None:
    """A private Slurm of emulated nodes: its daemons here, and no allocation it could be mistaken for."""
    if os.environ.get("SLURM_JOB_ID"):
        raise ConfigError("--launcher=slurm --network=emulated starts a Slurm cluster of its own on this machine: "
                          "run it outside a Slurm job")
    missing = [c for c in ("sbatch", "squeue", "scancel", "srun", "scontrol", "sinfo", "slurmctld", "slurmd", "munged")
               if shutil.which(c) is None and not os.path.exists(os.path.join("/usr/sbin", c))]
    if missing:
        raise ConfigError(f"--launcher=slurm --network=emulated needs Slurm's {', '.join(missing)}: run `make slurm` "
                          f"(see BUILD.md)")


def check_namespaces(config) -> None:
    """Network namespaces and tbf must work here, and for --link_latency TAP devices with a delay,
    jitter and rate the user-space delay line keeps faithfully, before anything starts."""
    problem = netns.support_error(want_delay=config.link_latency > 0, delay_ms=config.link_latency,
                                  jitter_ms=config.link_jitter, rate_bps=config.link_rate_bps)
    if problem:
        raise ConfigError(problem)
