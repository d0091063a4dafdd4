"""Can this machine start the run? Checks of what the launcher needs here (Horovod, root, Slurm's
commands, network namespaces), made after the flags are valid and before anything is spawned
or written, each ending with one line (ConfigError)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from typing import List

from cluster import netns
from tfbench.config.errors import ConfigError


def check_machine(config, dry_run: bool = False) -> List[str]:
    """Every check the run's flags call for; returns warnings for a dry run.

    A dry run of a Slurm job may be made where Slurm's commands are missing (to read the sbatch
    script before logging in to the cluster): it is warned that the run itself would be refused."""
    if config.strategy == "horovod":
        check_horovod()
    if config.horovod_elastic:
        check_elastic_root()
    warnings = []
    if config.launcher == "slurm" and config.network == "emulated":
        check_node_slurm()
    elif config.launcher == "slurm" and not os.environ.get("SLURM_JOB_ID"):
        try:
            check_slurm()
        except ConfigError as e:
            if not dry_run:
                raise
            warnings.append(f"the run itself would be refused here: {e}")
    if config.network == "emulated":
        check_namespaces(config)
    return warnings


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
