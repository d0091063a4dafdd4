"""A private Slurm cluster on this machine, for the Slurm integration tests and `make soak`.

Writes a slurm.conf for this host (CPUs=8 on whatever cores there are: more tasks than cores;
cluster.slurm.conf), starts munged with a socket of its own, then slurmctld and slurmd directly,
each in a temporary directory and on free ports so that nothing of the machine's own Slurm or
munge is touched; the daemons end with the process that started them (cluster.slurm.daemons).
stop() cancels every job and stops every daemon it started, and says which are still there if any.
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
from typing import Dict, List

import portpicker

from cluster.slurm import conf, daemons

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INSTALL = os.path.join(ROOT, "tools", "scripts", "install_slurm.sh")


def unavailable_reason() -> str:
    """'' when a private Slurm can run here; else why not (tests skip with that reason)."""
    if os.geteuid() != 0:
        return "the Slurm tests start munged, slurmctld and slurmd, which needs root"
    proc = subprocess.run(["bash", INSTALL], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"tools/scripts/install_slurm.sh failed: {proc.stderr.strip()[-300:]}"
    return ""


def cancel_all(env: Dict[str, str], jobs, timeout: float = 20.0) -> None:
    """scancel every job of this user and wait (up to `timeout`) for the queue to empty."""
    subprocess.run(["scancel", "--full", "--user", str(os.getuid())], env=env, capture_output=True)
    end = time.monotonic() + timeout
    while jobs() and time.monotonic() < end:
        time.sleep(0.5)


def queue(env: Dict[str, str]) -> List[str]:
    """The ids of the jobs squeue lists."""
    proc = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, env=env)
    return proc.stdout.split()


class LocalSlurm:
    """One node named after this host, one default partition "bench"."""

    def __init__(self, directory: str, cpus: int = 8):
        self.dir = directory
        self.cpus = cpus
        self.host = socket.gethostname()
        self.conf = os.path.join(directory, "slurm.conf")
        self.munge_socket = daemons.munge_socket(os.path.join(directory, "munge"))
        self.daemons: Dict[str, subprocess.Popen] = {}

    @property
    def env(self) -> Dict[str, str]:
        """Environment for Slurm commands (sbatch, squeue ...) talking to this cluster."""
        return dict(os.environ, SLURM_CONF=self.conf)

    def start(self, timeout: float = 60.0) -> None:
        os.chmod(self.dir, 0o755)  # munged (as the munge user) must reach its directory
        for sub in ("state", "spool", "log"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        log = os.path.join(self.dir, "log")
        self.daemons["munged"] = daemons.start_munged(os.path.dirname(self.munge_socket), log, self.env)
        self._write_conf()
        self.daemons["slurmctld"] = daemons.spawn(log, "slurmctld", [daemons.which("slurmctld"), "-D", "-c", "-f",
                                                                     self.conf], self.env)
        self.daemons["slurmd"] = daemons.spawn(log, "slurmd", [daemons.which("slurmd"), "-D", "-f", self.conf,
                                                               "-N", self.host], self.env)
        daemons.wait_until(lambda: self.sinfo_state() == "idle", timeout, "the Slurm node did not become idle",
                           self.daemons, log)

    def _write_conf(self) -> None:
        lines = conf.settings(self.dir, self.host, portpicker.pick_unused_port(), self.munge_socket)
        lines += [f"SlurmdPort={portpicker.pick_unused_port()}", f"NodeName={self.host} CPUs={self.cpus} State=UNKNOWN",
                  conf.partition(self.host)]
        conf.write(self.conf, lines)

    def sinfo_state(self) -> str:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=self.env)
        return proc.stdout.strip()

    def jobs(self) -> List[str]:
        return queue(self.env)

    def stop(self) -> List[str]:
        """Cancels every job, stops the daemons (slurmd, slurmctld, munged); returns what is left."""
        if "slurmctld" in self.daemons and self.daemons["slurmctld"].poll() is None:
            cancel_all(self.env, self.jobs)
        for name in ("slurmd", "slurmctld", "munged"):
            if name in self.daemons:
                daemons.stop(self.daemons[name])
        return [name for name, p in self.daemons.items() if p.poll() is None]
