"""python -m tools.bench.soak [--runs=50] [--dir=DIR]: does tfbench leave anything behind?

Back-to-back short runs of every strategy (and the emulated network, and Slurm through a private
Slurm it starts on this machine, cluster.slurm.local_cluster, when it can), then a small sweep interrupted by SIGINT and by SIGKILL at random points and resumed.
After each, what the machine holds is compared with before the soak: processes of tfbench,
listening TCP ports, network namespaces, Slurm jobs, temporary directories, and this process's
open files. Every line should read 0; the sweep's points must each be done exactly once.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Set

import psutil
import yaml
from absl import app, flags

from cluster.net import netns
from cluster.supervision import leftovers
from tfbench.config import helptext

FLAGS = flags.FLAGS
TINY = ["--model=tiny", "--image_size=16", "--num_classes=10", "--batch_size=4", "--num_warmup_steps=1",
        "--num_steps=3", "--monitor_interval=0.5", "--stall_timeout=120", "--deadline=300"]
CASES = (
    ["--strategy=default"],
    ["--strategy=mirrored", "--num_local_devices=2"],
    ["--strategy=multi_worker_mirrored", "--num_workers=2"],
    ["--strategy=parameter_server", "--num_workers=2"],
    ["--strategy=parameter_server", "--num_workers=2", "--ps_sync"],
    ["--strategy=horovod", "--num_workers=2"],
    ["--strategy=horovod", "--num_workers=2", "--horovod_elastic", "--num_steps=300", "--fault=worker_1:kill@20"],
    ["--strategy=multi_worker_mirrored", "--num_workers=2", "--network=emulated", "--link_bandwidth=100mbit"],
    ["--strategy=parameter_server", "--num_workers=2", "--launcher=slurm"],
)
SWEEP = {"model": ["tiny"], "image_size": [16], "strategy": ["multi_worker_mirrored", "parameter_server"],
         "num_workers": [1, 2], "batch_size": [4], "repeats": 1, "timeout_s": 120,
         "fixed": {"num_classes": 10, "num_warmup_steps": 1, "num_steps": 20, "stall_timeout": 60}}


def define_flags() -> None:
    if "runs" not in FLAGS:
        flags.DEFINE_integer("runs", 50, "Short runs, cycling through the strategies and launchers.")
        flags.DEFINE_string("dir", "", "Where the runs go; default: a new temporary directory.")
        flags.DEFINE_integer("seed", 0, "Seed of the interruption points.")
        flags.DEFINE_boolean("slurm", True, "Start a private Slurm on this machine (root) for the Slurm runs.")


def snapshot() -> Dict[str, Set]:
    """What a run could leave behind (cluster.supervision.leftovers), and listening ports, Slurm jobs,
    temporary directories and this process's open files, as sets that can be compared."""
    ports = {f"{c.laddr.ip}:{c.laddr.port}" for c in psutil.net_connections(kind="tcp")
             if c.status == psutil.CONN_LISTEN}
    temp = {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(("tmp", "tfbench"))}
    return {**leftovers.snapshot(), "listening ports": ports, "slurm jobs": _slurm_jobs(), "temp dirs": temp,
            "open files": {f.path for f in psutil.Process().open_files()}}


SLURM_ENV: Dict[str, str] = {}  # SLURM_CONF of the soak's private Slurm, once started


def _slurm_jobs() -> Set[str]:
    try:
        out = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True, timeout=10,
                             env=dict(os.environ, **SLURM_ENV))
    except (OSError, subprocess.SubprocessError):
        return set()
    return set(out.stdout.split("\n")) - {""} if out.returncode == 0 else set()


def leaks(before: Dict[str, Set], settle_s: float = 3.0) -> Dict[str, Set]:
    """What is there now and was not before (waits a little for exiting processes)."""
    return leftovers.left_since(before, settle_s, snapshot)


def report(label: str, extra: Dict[str, Set]) -> bool:
    counts = ", ".join(f"{k} {len(v)}" for k, v in extra.items())
    print(f"{label}: leaked {counts}", flush=True)
    for kind, items in extra.items():
        for item in sorted(items)[:5]:
            print(f"    {kind}: {item}")
    return not any(extra.values())


def available(case: List[str]) -> str:
    """'' when this machine can run the case, else why not."""
    if "--network=emulated" in case and netns.support_error(False):
        return netns.support_error(False)
    if "--horovod_elastic" in case and os.geteuid() != 0:
        return "Horovod elastic ranks get loopback addresses in a network namespace (root)"
    if "--launcher=slurm" in case and not SLURM_ENV:
        return "no private Slurm could be started here (root and tools/scripts/install_slurm.sh needed)"
    return ""


def start_slurm(root: str):
    """A private Slurm on this machine (cluster.slurm.local_cluster), or None with the reason printed."""
    from cluster.slurm import local_cluster

    reason = local_cluster.unavailable_reason()
    if reason:
        print(f"no Slurm: {reason}")
        return None
    directory = tempfile.mkdtemp(prefix="tfbench-slurm-")  # munged must reach it: not under a private dir
    slurm = local_cluster.LocalSlurm(directory)
    slurm.start()
    SLURM_ENV["SLURM_CONF"] = slurm.conf
    return slurm


def soak_runs(root: str, before: Dict[str, Set], runs: int) -> int:
    clean = 0
    cases = [c for c in CASES if not available(c)]
    for c in CASES:
        if available(c):
            print(f"skipped {' '.join(c)}: {available(c)}")
    for i in range(runs):
        case = cases[i % len(cases)]
        start = time.time()
        proc = subprocess.run([sys.executable, "-m", "tfbench", *TINY, *case, f"--logdir={root}/runs",
                               f"--run_id=soak{i:03d}"], capture_output=True, text=True,
                              env=dict(os.environ, **SLURM_ENV))
        status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
        clean += report(f"run {i + 1}/{runs} {' '.join(case)} ({status}, {time.time() - start:.0f} s)", leaks(before))
    return clean


def sweep_command(sweep_dir: str, config: str) -> List[str]:
    return [sys.executable, "-m", "tools.sweep", f"--config={config}", f"--sweep_dir={sweep_dir}", "--report=false"]


def interrupted_sweep(root: str, before: Dict[str, Set], rng: random.Random) -> bool:
    """A sweep stopped by SIGINT, then by SIGKILL, each at a random moment, then resumed."""
    config = os.path.join(root, "soak_sweep.yaml")
    with open(config, "w", encoding="utf-8") as f:
        yaml.safe_dump(SWEEP, f)
    sweep_dir = os.path.join(root, "sweep")
    ok = True
    for sig in (signal.SIGINT, signal.SIGKILL):
        proc = subprocess.Popen(sweep_command(sweep_dir, config), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        wait = rng.uniform(5, 25)
        time.sleep(wait)
        os.killpg(proc.pid, sig) if sig == signal.SIGINT else proc.kill()  # Ctrl-C reaches the group
        proc.wait()
        ok &= report(f"sweep {signal.Signals(sig).name} after {wait:.0f} s", leaks(before, settle_s=15))
    subprocess.run(sweep_command(sweep_dir, config), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ok &= report("sweep resumed to the end", leaks(before))
    from tools.rundirs.sweep_state import DONE, SweepDir

    sweep = SweepDir(sweep_dir)
    points = sweep.read_spec()["points"]
    done = [a["point_id"] for a in sweep.attempts() if a["status"] == DONE]
    lost = sorted(set(points) - set(done))
    twice = sorted({p for p in done if done.count(p) > 1})
    print(f"sweep points: {len(points)}, done once {len(set(done)) - len(twice)}, lost {len(lost)}, "
          f"done twice {len(twice)}; attempts recorded {len(sweep.attempts())}")
    return ok and not lost and not twice


def main(argv) -> int:
    root = FLAGS.dir or tempfile.mkdtemp(prefix="tfbench-soak-")
    os.makedirs(root, exist_ok=True)
    slurm = None
    try:
        slurm = start_slurm(root) if FLAGS.slurm else None
        before = snapshot()  # the private Slurm's daemons and ports are there before and after
        before["temp dirs"].add(os.path.basename(root))
        clean = soak_runs(root, before, FLAGS.runs)
        print(f"{clean}/{FLAGS.runs} runs left nothing behind")
        swept = interrupted_sweep(root, before, random.Random(FLAGS.seed))
    finally:
        if slurm is not None:
            left = slurm.stop()
            print(f"private Slurm stopped; daemons left: {left or 0}")
    print(f"soak {'passed' if clean == FLAGS.runs and swept else 'FAILED'}; runs in {root}")
    return 0 if clean == FLAGS.runs and swept else 1


if __name__ == "__main__":
    app.run(main, flags_parser=helptext.parser(__doc__, lambda: [("Soak", ["runs", "dir", "seed", "slurm"])],
                                               "tools.bench.soak", define_flags))
