"""environment.json: what a result depends on besides its flags (versions, CPU, GPUs, host)."""
from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys

from tfbench.framework import distribution
from tfbench.measure import json_cache, machine, peaks

PACKAGES = ("tensorflow", "tf-keras", "keras", "horovod", "numpy", "tensorboard")


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


COMMIT_ENV = "TFBENCH_COMMIT"  # the commit an image was built from (make image sets it)


def tfbench_commit():
    """The commit of the tfbench checkout that measured, "+modified" when its tracked files differ
    from it. Numbers quoted elsewhere name it. An installed copy (site-packages, no checkout
    around it) names the commit it was installed from, else None."""
    if not os.path.exists(os.path.join(ROOT, ".git")):
        return installed_commit()
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+modified" if dirty.stdout.strip() else "")


def installed_commit():
    """pip's record of `pip install git+URL@REF` (direct_url.json), or COMMIT_ENV; None when neither says."""
    try:
        direct_url = importlib.metadata.distribution("tfbench").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        direct_url = None
    commit = (json.loads(direct_url).get("vcs_info") or {}).get("commit_id") if direct_url else None
    return commit[:7] if commit else (os.environ.get(COMMIT_ENV) or None)


def _version(package: str):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_build_cache() -> str:
    """Where horovod_check_build keeps its answers (under $HOME, read at each call)."""
    return os.path.join(os.path.expanduser("~"), ".cache", "tfbench", "horovod-check-build.json")


def horovod_check_build(refresh: bool = False) -> str:
    """`horovodrun --check-build`: which frameworks, controllers and tensor operations it has.

    It imports TensorFlow and took 10-30 s on 2 shared cores before every Horovod run's tasks
    could start, so its answer is cached per Horovod and TensorFlow version and environment; the
    Horovod install (tools/scripts/build_horovod.sh) runs it with `refresh` and fills the cache."""
    horovodrun = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    if not os.path.exists(horovodrun):
        return "horovodrun not installed"
    # the environment's real path: clones linking one shared environment (make setup) share the answer
    key = f"{os.path.realpath(sys.prefix)}|horovod {_version('horovod')}|tf {distribution.tensorflow_version()}"
    cached = None if refresh else json_cache.read(check_build_cache()).get(key)
    if cached:
        return cached
    out = _run_check_build(horovodrun)
    if "Available Frameworks" in out:
        json_cache.write(check_build_cache(), key, out)
    return out


def _run_check_build(horovodrun: str) -> str:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        out = subprocess.run([horovodrun, "--check-build"], capture_output=True, text=True, timeout=120,
                             env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"horovodrun --check-build failed: {e}"
    return out.stdout.strip()


def collect(with_horovod: bool = False) -> dict:
    gpus = machine.gpus()
    env = {
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": machine.cpu_model(),
        "cpu_count": os.cpu_count(),
        "cores_available": sorted(os.sched_getaffinity(0)),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "gpus": gpus,
        "machine": machine.key(machine.identity(gpus)),
        "versions": {p: _version(p) for p in PACKAGES},
        "tensorflow_distribution": distribution.tensorflow(),
        "tf_enable_onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1 (tfbench's default)"),
        "tfbench_commit": tfbench_commit(),
    }
    env["peak"] = peaks.for_environment()  # measured GEMM peak (tools.bench.peak), or why there is none
    if with_horovod:
        env["horovod_check_build"] = horovod_check_build()
    return env
