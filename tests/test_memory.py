"""The memory estimate refuses a run that cannot fit before any task starts (it used to fail
inside a task after every task had imported TensorFlow)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from tfbench.config import RunConfig
from tfbench.config.errors import ConfigError
from tfbench.measure import memory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = {"params": 1_000_000, "activation_floats": 2_000_000, "largest_floats": 100_000}


def test_train_tasks_hold_weights_gradients_and_every_activation():
    """Per task: runtime + |w| + gradients + every forward activation of the step's images."""
    config = RunConfig(strategy="multi_worker_mirrored", num_workers=2, batch_size=10)
    est = memory.estimate(config, ["worker", "worker"], MODEL)
    per_task = memory.RUNTIME_BYTES + 2 * 4_000_000 + 4 * 2_000_000 * 10
    assert est == {"total": 2 * per_task, "largest_task": per_task, "tasks": 2}


def test_forward_needs_the_largest_op_and_ps_its_share_of_the_weights():
    forward = RunConfig(mode="forward", batch_size=10)
    assert memory.estimate(forward, ["worker"], MODEL)["total"] == memory.RUNTIME_BYTES + 4_000_000 + 3 * 4 * 100_000 * 10
    ps = RunConfig(strategy="parameter_server", num_workers=2, num_ps=2, batch_size=10)
    est = memory.estimate(ps, ["chief", "ps", "ps"], MODEL)
    assert est["total"] == 3 * memory.RUNTIME_BYTES + 2 * 4_000_000 + 2 * (2 * 4_000_000 // 2)


def test_mirrored_counts_every_local_replica_batch():
    one = memory.estimate(RunConfig(strategy="mirrored", num_local_devices=1, batch_size=10), ["worker"], MODEL)
    two = memory.estimate(RunConfig(strategy="mirrored", num_local_devices=2, batch_size=10), ["worker"], MODEL)
    assert two["total"] - one["total"] == 4 * 2_000_000 * 10


def test_a_run_that_cannot_fit_is_refused_in_one_line():
    config = RunConfig(batch_size=4096)
    with pytest.raises(ConfigError) as err:
        memory.check(config, ["worker"], available=8 * memory.GB, model=MODEL)
    message = str(err.value)
    assert "\n" not in message and "--batch_size=4096 does not fit" in message and "8.0 GB available" in message
    assert memory.check(RunConfig(batch_size=8), ["worker"], available=8 * memory.GB, model=MODEL)["tasks"] == 1


@pytest.mark.slow
def test_counts_come_from_the_model_graph_and_are_cached(tmp_path, monkeypatch):
    monkeypatch.setenv(memory.CACHE_ENV, str(tmp_path / "cache.json"))
    counts = memory.counts(RunConfig(model="tiny", image_size=16, num_classes=10))
    assert counts["params"] == 3 * 3 * 3 * 8 + 8 + (8 + 1) * 10  # conv kernel + bias, dense
    assert counts["variables"] == 4  # conv kernel and bias, dense kernel and bias
    assert counts["largest_floats"] == 16 * 16 * 8  # the convolution's output
    assert counts["activation_floats"] >= 16 * 16 * 8 + 8 + 10
    assert memory._read_cache()["tiny|16px|10 classes|NHWC"] == counts


class _Done:
    """What subprocess.run returns for a counting child that printed `stdout`."""

    def __init__(self, stdout):
        self.returncode, self.stdout, self.stderr = 0, stdout, ""


def test_a_cached_entry_without_the_variable_count_is_counted_again(tmp_path, monkeypatch):
    monkeypatch.setenv(memory.CACHE_ENV, str(tmp_path / "cache.json"))
    old = {"params": 10, "activation_floats": 20, "largest_floats": 5}
    memory._write_cache("tiny|16px|10 classes|NHWC", old)
    fresh = dict(old, variables=2)
    calls = []
    monkeypatch.setattr(memory.subprocess, "run", lambda *a, **k: calls.append(a) or _Done(json.dumps(fresh)))
    tiny = RunConfig(model="tiny", image_size=16, num_classes=10)
    assert memory.counts(tiny) == fresh
    assert memory.counts(tiny.to_dict()) == fresh  # now cached with the new key; a run's config.json reads alike
    assert len(calls) == 1 and memory._read_cache()["tiny|16px|10 classes|NHWC"] == fresh


def test_small_runs_fit_under_the_bound_without_counting(monkeypatch):
    monkeypatch.setattr(memory, "counts", lambda *a, **k: pytest.fail("counted a run the bound already admits"))
    config = RunConfig(model="resnet50", image_size=224, batch_size=16, strategy="multi_worker_mirrored", num_workers=2)
    assert memory.check(config, ["worker", "worker"], available=24 * memory.GB)["total"] < 24 * memory.GB


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny", "alexnet", "resnet50"])
def test_every_registered_model_stays_under_the_bounds(model):
    """At the smallest image a model takes (fixed costs weigh most per pixel) and at 64 px; counted
    in pytest's process (the child process that counts for the launcher is tested above and below)."""
    from tfbench.workloads.images import MODELS

    classes = 1000
    for size in (MODELS[model].min_image_size, 64):
        config = RunConfig(model=model, image_size=size, num_classes=classes)
        counts, bound = memory.count_model(config), config.workload.memory_bound(config)
        assert counts["params"] <= bound["params"]
        assert counts["activation_floats"] <= bound["activation_floats"], size


@pytest.mark.slow
def test_cli_refuses_an_impossible_batch_before_starting_anything(tmp_path, resnet50_counted):
    shutil.copy(resnet50_counted[1], tmp_path / "cache.json")  # ResNet50 at 224 px, counted once per session
    env = dict(os.environ, **{memory.CACHE_ENV: str(tmp_path / "cache.json")})
    proc = subprocess.run([sys.executable, "-m", "tfbench", "--model=resnet50", "--image_size=224",
                           "--batch_size=100000", f"--logdir={tmp_path / 'runs'}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not fit" in lines[0] and "lower --batch_size" in lines[0], lines
    assert not (tmp_path / "runs").exists()  # nothing started, nothing written


def test_a_dry_run_counts_no_model_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(memory.CACHE_ENV, str(tmp_path / "cache.json"))
    monkeypatch.setattr(memory, "counts", lambda *a, **k: pytest.fail("a dry run must not count the model"))
    config = RunConfig(model="resnet50", image_size=224, batch_size=100000)
    result = memory.check(config, ["worker"], available=8 * memory.GB, count=False)
    assert "not counted in a dry run" in result["unchecked"] and "resnet50" in result["unchecked"]
    assert memory.describe(result).startswith("memory: not counted in a dry run")
    small = memory.check(RunConfig(model="tiny", image_size=16), ["worker"], available=8 * memory.GB, count=False)
    assert memory.describe(small).startswith("memory: at most ") and "8.0 GB available" in memory.describe(small)


def test_cli_dry_run_stays_quiet_and_writes_no_count(tmp_path):
    """--dry_run used to count the model in its own process: TensorFlow's start-up logs on stderr,
    seconds of import, and a cache file written by a command that promises to write nothing."""
    cache = tmp_path / "cache.json"
    env = dict(os.environ, **{memory.CACHE_ENV: str(cache)})
    proc = subprocess.run([sys.executable, "-m", "tfbench", "--model=resnet50", "--image_size=224",
                           "--batch_size=100000", "--strategy=multi_worker_mirrored", "--num_workers=8",
                           f"--logdir={tmp_path / 'runs'}", "--dry_run"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "memory: not counted in a dry run" in proc.stdout
    assert not cache.exists() and not (tmp_path / "runs").exists()
