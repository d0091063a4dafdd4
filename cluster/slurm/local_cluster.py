"""A private Slurm cluster on this machine, for the Slurm integration tests and `make soak`.

Writes a slurm.conf for this host (CPUs=8 on whatever cores there are: more tasks than cores;
no cgroup plugins, since PID 1 is not systemd), starts munged with a socket of its own, then
slurmctld and slurmd directly, each in a temporary directory and on free ports so that nothing
of the machine's own Slurm or munge is touched. stop() cancels every job and stops every daemon
it started, and says which are still there if any.
"""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from typing import Dict, List

import portpicker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INSTALL = os.path.join(ROOT, "tools", "install_slurm.sh")
SBIN = ("/usr/sbin", "/usr/bin")


def unavailable_reason() -> str:
    """'' when a private Slurm can run here; else why not (tests skip with that reason)."""
    if os.geteuid() != 0:
        return "the Slurm tests start munged, slurmctld and slurmd, which needs root"
    proc = subprocess.run(["bash", INSTALL], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"tools/install_slurm.sh failed: {proc.stderr.strip()[-300:]}"
    return ""


def _which(name: str) -> str:
    for d in SBIN:
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    raise FileNotFoundError(name)


class LocalSlurm:
    """One node named after this host, one default partition "bench"."""

    def __init__(self, directory: str, cpus: int = 8):
        self.dir = directory
        self.cpus = cpus
        self.host = socket.gethostname()
        self.conf = os.path.join(directory, "slurm.conf")
        self.munge_socket = os.path.join(directory, "munge", "munge.socket")
        self.daemons: Dict[str, subprocess.Popen] = {}

    @property
    def env(self) -> Dict[str, str]:
        """Environment for Slurm commands (sbatch, squeue ...) talking to this cluster."""
        return dict(os.environ, SLURM_CONF=self.conf)

    def start(self, timeout: float = 60.0) -> None:
        os.chmod(self.dir, 0o755)  # munged (as the munge user) must reach its directory
        for sub in ("state", "spool", "log", "munge"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        self._start_munge()
        self._write_conf()
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-c", "-f", self.conf])
        self._spawn("slurmd", [_which("slurmd"), "-D", "-f", self.conf, "-N", self.host])
        self._wait_idle(timeout)

    def _start_munge(self) -> None:
        munge = pwd.getpwnam("munge")
        key = os.path.join(self.dir, "munge", "munge.key")
        shutil.copyfile("/etc/munge/munge.key", key) if os.path.exists("/etc/munge/munge.key") else \
            subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True)
        os.chmod(key, 0o400)
        for path in (os.path.dirname(key), key):
            os.chown(path, munge.pw_uid, munge.pw_gid)
        os.chmod(os.path.dirname(key), 0o755)  # clients need to reach the socket
        mdir = os.path.dirname(key)
        self._spawn("munged", [_which("munged"), "--foreground", f"--socket={self.munge_socket}",
                               f"--key-file={key}", f"--pid-file={mdir}/munged.pid", f"--log-file={mdir}/munged.log",
                               f"--seed-file={mdir}/munged.seed"], user=munge)
        self._wait(lambda: os.path.exists(self.munge_socket), 20, "munged did not create its socket")

    def _write_conf(self) -> None:
        ctld_port, slurmd_port = portpicker.pick_unused_port(), portpicker.pick_unused_port()
        d = self.dir
        lines = [
            "ClusterName=tfbench", f"SlurmctldHost={self.host}", f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}", "SlurmUser=root", "AuthType=auth/munge", "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "MpiDefault=none", "SwitchType=switch/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU", "SlurmdParameters=config_overrides", "ReturnToService=2",
            "SchedulerType=sched/backfill", "InactiveLimit=0", "KillWait=5", "MinJobAge=120",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/slurmd-%n",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
            f"NodeName={self.host} CPUs={self.cpus} State=UNKNOWN",
            f"PartitionName=bench Nodes={self.host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
        ]
        with open(self.conf, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")

    def _spawn(self, name: str, command: List[str], user=None) -> None:
        log = open(os.path.join(self.dir, "log", f"{name}.out"), "ab")
        preexec = None
        if user is not None:
            def preexec():
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)
        self.daemons[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                              start_new_session=True, preexec_fn=preexec)
        log.close()

    def _wait(self, ready, timeout: float, message: str) -> None:
        end = time.monotonic() + timeout
        while not ready():
            dead = [n for n, p in self.daemons.items() if p.poll() is not None]
            if dead or time.monotonic() > end:
                raise RuntimeError(f"{message}; exited: {dead}; logs in {self.dir}/log")
            time.sleep(0.3)

    def sinfo_state(self) -> str:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=self.env)
        return proc.stdout.strip()

    def _wait_idle(self, timeout: float) -> None:
        self._wait(lambda: self.sinfo_state() == "idle", timeout, "the Slurm node did not become idle")

    def jobs(self) -> List[str]:
        proc = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, env=self.env)
        return proc.stdout.split()

    def stop(self) -> List[str]:
        """Cancels every job, stops the daemons (slurmd, slurmctld, munged); returns what is left."""
        if "slurmctld" in self.daemons and self.daemons["slurmctld"].poll() is None:
            subprocess.run(["scancel", "--full", "--user", str(os.getuid())], env=self.env, capture_output=True)
            end = time.monotonic() + 20
            while self.jobs() and time.monotonic() < end:
                time.sleep(0.5)
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.daemons.get(name)
            if p is None or p.poll() is not None:
                continue
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait(5)
        return [name for name, p in self.daemons.items() if p.poll() is None]
