"""Shared test helpers: run the CLI as a user would, and find leftover processes."""
from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# A tiny, fast configuration for runs that really launch TensorFlow tasks.
TINY = ["--model=tiny", "--image_size=16", "--num_classes=10", "--batch_size=4",
        "--num_warmup_steps=2", "--num_steps=3", "--monitor_interval=0.5"]


def run_cli(*args, timeout=300, env=None, module="tfbench"):
    """`python -m tfbench ARGS` in the repository; returns the CompletedProcess."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=full_env)


def processes_mentioning(text: str):
    """Live processes whose command line or environment mentions `text` (e.g. a run dir)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if p.pid == os.getpid():
                continue
            if any(text in part for part in (p.info["cmdline"] or [])):
                found.append(p)
                continue
            if any(text in v for v in p.environ().values()):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@pytest.fixture
def logdir(tmp_path):
    path = tmp_path / "runs"
    yield str(path)
    leftovers = processes_mentioning(str(path))
    for p in leftovers:
        p.kill()
    assert not leftovers, f"processes left behind: {[p.pid for p in leftovers]}"


LEFTOVER_GRACE_S = 10.0  # a clean-up may still be reaping what it killed
_BEFORE = pytest.StashKey[dict]()
_LEFT = pytest.StashKey[list]()


def suite_leftovers(before: dict, settle_s: float = 0.0) -> list:
    """What cluster.leftovers finds now (or after up to settle_s) and did not before, one line each."""
    from cluster import leftovers

    new = leftovers.left_since(before, settle_s)
    return sorted(f"{kind}: {item}" for kind, items in new.items() for item in items)


def pytest_sessionstart(session):
    from cluster import leftovers

    session.config.stash[_BEFORE] = leftovers.snapshot()


def pytest_sessionfinish(session, exitstatus):
    """Fails the suite when it leaves anything behind that was not there at its start
    (cluster.leftovers), however every test ended."""
    before = session.config.stash.get(_BEFORE, None)
    left = suite_leftovers(before, LEFTOVER_GRACE_S) if before is not None else []
    session.config.stash[_LEFT] = left
    if left:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    left = config.stash.get(_LEFT, [])
    if left:
        terminalreporter.section("left behind by the test suite", red=True)
        for line in left:
            terminalreporter.line(line, red=True)
