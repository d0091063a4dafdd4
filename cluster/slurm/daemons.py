"""Starting and stopping the daemons of a private Slurm: munged, slurmctld, slurmd.

Each daemon runs in the foreground in a session of its own, its output in <dir>/log/<name>.out.
Daemons in this machine's own namespace (munged, slurmctld) get PR_SET_PDEATHSIG=SIGKILL, so
they end with the process that started them even when it is killed outright; the request is
made after any change of user (the kernel clears it when credentials change) and refers to the
starting *thread*: start a cluster from a thread that outlives it (the main thread).
"""
from __future__ import annotations

import ctypes
import os
import pwd
import shutil
import signal
import subprocess
import time
from typing import Callable, Dict, List, Optional

SBIN = ("/usr/sbin", "/usr/bin")
PR_SET_PDEATHSIG = 1


def which(name: str) -> str:
    for d in SBIN:
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    raise FileNotFoundError(name)


def _preexec(user: Optional[pwd.struct_passwd], die_with_owner: bool) -> Callable[[], None]:
    owner = os.getpid()

    def preexec():
        if user is not None:
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
        if die_with_owner:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != owner:  # the owner died before the request was made
                os._exit(1)

    return preexec


def spawn(log_dir: str, name: str, command: List[str], env: Dict[str, str], user=None,
          die_with_owner: bool = True, cwd: Optional[str] = None) -> subprocess.Popen:
    """Starts one daemon in the foreground; its output goes to <log_dir>/<name>.out."""
    with open(os.path.join(log_dir, f"{name}.out"), "ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True, preexec_fn=_preexec(user, die_with_owner))


def start_munged(directory: str, log_dir: str, env: Dict[str, str]) -> subprocess.Popen:
    """munged as the munge user with the machine's key (or a new one) and a socket of its own in
    <directory> (made reachable for the munge user), dying with its owner."""
    munge = pwd.getpwnam("munge")
    os.makedirs(directory, exist_ok=True)
    key = os.path.join(directory, "munge.key")
    if os.path.exists("/etc/munge/munge.key"):
        shutil.copyfile("/etc/munge/munge.key", key)
    else:
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True)
    os.chmod(key, 0o400)
    for path in (directory, key):
        os.chown(path, munge.pw_uid, munge.pw_gid)
    os.chmod(directory, 0o755)  # clients need to reach the socket
    socket_path = munge_socket(directory)
    proc = spawn(log_dir, "munged", [which("munged"), "--foreground", f"--socket={socket_path}", f"--key-file={key}",
                                     f"--pid-file={directory}/munged.pid", f"--log-file={directory}/munged.log",
                                     f"--seed-file={directory}/munged.seed"], env, user=munge)
    wait_until(lambda: os.path.exists(socket_path), 20, "munged did not create its socket", {"munged": proc}, log_dir)
    return proc


def munge_socket(directory: str) -> str:
    return os.path.join(directory, "munge.socket")


def wait_until(ready: Callable[[], bool], timeout: float, message: str, daemons: Dict[str, subprocess.Popen],
               log_dir: str) -> None:
    """Returns once ready(); RuntimeError when a daemon exits first or the time is up."""
    end = time.monotonic() + timeout
    while not ready():
        dead = [n for n, p in daemons.items() if p.poll() is not None]
        if dead or time.monotonic() > end:
            raise RuntimeError(f"{message}; exited: {dead}; logs in {log_dir}")
        time.sleep(0.2)


def stop(proc: subprocess.Popen, grace: float = 10.0) -> bool:
    """SIGTERM, then SIGKILL to its process group; True once it has exited."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
    return proc.poll() is not None
