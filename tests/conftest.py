"""Shared test helpers: run the CLI as a user would, find leftover processes, the TensorFlow
runs several tests read (`clusters`, tests/clusters.py), and in a run without the slow tests
(`-m "not slow ..."`: make test-fast, the first pass of make test) a guard that fails any test
that imports TensorFlow or starts a process that does, and lets local runs create no network
namespace (tests/fast_guard)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import psutil
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytest_plugins = ["xdist_groups"]  # the root tests of one module on one pytest-xdist worker (tests/xdist_groups.py)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# Tunings made on the spot go to a cache no test shares with the user's (tfbench.results.tuned)
os.environ.setdefault("TFBENCH_TUNED_CACHE", os.path.join(ROOT, "sweeps", "tests-no-tuned-cache", "tuned.json"))

# A tiny, fast configuration for runs that really launch TensorFlow tasks.
TINY = ["--model=tiny", "--image_size=16", "--num_classes=10", "--batch_size=4",
        "--num_warmup_steps=2", "--num_steps=3", "--monitor_interval=0.5"]


def run_cli(*args, timeout=300, env=None, module="tfbench"):
    """`python -m tfbench ARGS` in the repository; returns the CompletedProcess."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=full_env)


PACKAGES = ("tfbench", "cluster", "strategies", "tools")  # the project's own packages


def python_sources(packages=PACKAGES):
    """(path relative to the checkout, path) of every Python module of the project's packages."""
    for package in packages:
        for root, _, files in os.walk(os.path.join(ROOT, package)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    yield os.path.relpath(path, ROOT), path


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


@pytest.fixture(scope="session")
def clusters(tmp_path_factory):
    """The shared TensorFlow runs (tests/clusters.py), each launched the first time a test reads
    it; at the session's end nothing of any of them may be left running."""
    from clusters import Clusters

    launched = Clusters(str(tmp_path_factory.mktemp("clusters")))
    yield launched
    left = launched.kill_leftovers()
    assert not left, f"processes left behind by the shared runs: {left}"


RESNET50_PREDICT = ["predict", "--strategy=parameter_server", "--num_ps=1", "--num_workers=1,16,64,256,1024",
                    "--link_bandwidth=1gbe", "--model=resnet50", "--batch_size=32", "--compute_ms_per_image=100"]


@pytest.fixture(scope="session")
def resnet50_counted(tmp_path_factory):
    """`python -m tools.model predict` of ResNet50 at 224 px with an empty model-count cache: the real
    count (TensorFlow in a child process), made once per session; (its result, the cache it filled).
    Tests that only need the count copy the cache instead of counting again (13 s each)."""
    cache = tmp_path_factory.mktemp("counts") / "counts.json"
    result = run_cli(*RESNET50_PREDICT, module="tools.model", timeout=300,
                     env={"TFBENCH_MODEL_MEMORY_CACHE": str(cache)})
    return result, cache


def autograph_files() -> set:
    """TensorFlow's autograph sources in the machine's temporary directory: a task leaves them
    there when it ends without Python's exit and its temporary directory was not one tfbench
    removes (tfbench.app.task.own_temporary_directory, cluster.supervision.scratch)."""
    import glob
    import tempfile

    return set(glob.glob(os.path.join(tempfile.gettempdir(), "__autograph_generated_file*")))


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
    """What cluster.supervision.leftovers finds now (or after up to settle_s) and did not before, one line each."""
    from cluster.supervision import leftovers

    new = leftovers.left_since(before, settle_s)
    return sorted(f"{kind}: {item}" for kind, items in new.items() for item in items)


def pytest_sessionstart(session):
    from cluster.supervision import leftovers

    session.config.stash[_BEFORE] = leftovers.snapshot()


FAST_GUARD = os.path.join(ROOT, "tests", "fast_guard")
_GUARD_DIR = pytest.StashKey[str]()


def fast_run(config) -> bool:
    """A run that deselects the slow tests: make test-fast, and the first pass of make test."""
    return "not slow" in (config.getoption("markexpr") or "")


def xdist_worker(config) -> bool:
    """A pytest-xdist worker process (make test runs the fast tests on both cores)."""
    return hasattr(config, "workerinput")


def pytest_configure(config):
    """In a fast run: the guard here and in every Python process the tests start (an xdist
    worker is one of those: it shares the guard and directory of the pytest that started it)."""
    if not fast_run(config):
        return
    if xdist_worker(config) and os.environ.get("TFBENCH_FAST_GUARD_DIR"):
        config.stash[_GUARD_DIR] = os.environ["TFBENCH_FAST_GUARD_DIR"]
        return
    import importlib.util
    import tempfile

    directory = tempfile.mkdtemp(prefix="tfbench-fast-guard-")
    config.stash[_GUARD_DIR] = directory
    os.environ["TFBENCH_FAST_GUARD_DIR"] = directory
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (FAST_GUARD, os.environ.get("PYTHONPATH")) if p)
    spec = importlib.util.spec_from_file_location("tfbench_fast_guard", os.path.join(FAST_GUARD, "sitecustomize.py"))
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    if guard.NO_NAMESPACE in sys.modules:  # imported before the guard was installed
        sys.modules[guard.NO_NAMESPACE].create = guard.no_namespace


def tensorflow_imports(config) -> list:
    """Lines `test, module, command` of every refused TensorFlow import of this fast run."""
    directory = config.stash.get(_GUARD_DIR, None)
    if directory is None:
        return []
    lines = []
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name)) as f:
            lines += [line.rstrip("\n") for line in f if line.strip()]
    return lines


def pytest_unconfigure(config):
    directory = config.stash.get(_GUARD_DIR, None)
    if directory is not None and not xdist_worker(config):
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_tensorflow_in_a_fast_run(request):
    before = set(tensorflow_imports(request.config))
    yield
    new = [line for line in tensorflow_imports(request.config)
           if line not in before and line.startswith(request.node.nodeid + " ")]  # not another worker's test
    if new:
        pytest.fail("a fast test imported TensorFlow (mark it slow):\n" + "\n".join(new), pytrace=False)


@pytest.fixture(autouse=True)
def _no_launcher_variable_left_behind():
    """A test that sets a rank's environment in this process (Horovod's, TF_CONFIG) must undo it:
    every run the suite starts after it would inherit it (two ranks that both believe they are
    rank 0 wait for each other until Gloo's timeout)."""
    before = {k: v for k, v in os.environ.items() if k.startswith(("HOROVOD_", "TF_CONFIG"))}
    yield
    after = {k: v for k, v in os.environ.items() if k.startswith(("HOROVOD_", "TF_CONFIG"))}
    if after != before:
        changed = sorted(set(after.items()) ^ set(before.items()))
        pytest.fail(f"the test left launcher variables changed in the suite's environment: {changed}", pytrace=False)


def pytest_sessionfinish(session, exitstatus):
    """Fails the suite when it leaves anything behind that was not there at its start
    (cluster.supervision.leftovers), however every test ended; under xdist, pytest that started the workers
    checks once they are all done (a worker would see the other's processes)."""
    if xdist_worker(session.config):
        return
    before = session.config.stash.get(_BEFORE, None)
    left = suite_leftovers(before, LEFTOVER_GRACE_S) if before is not None else []
    session.config.stash[_LEFT] = left
    if left or tensorflow_imports(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    imported = tensorflow_imports(config)
    if imported:
        terminalreporter.section("TensorFlow imported in a fast run", red=True)
        for line in imported:
            terminalreporter.line(line, red=True)
    left = config.stash.get(_LEFT, [])
    if left:
        terminalreporter.section("left behind by the test suite", red=True)
        for line in left:
            terminalreporter.line(line, red=True)
