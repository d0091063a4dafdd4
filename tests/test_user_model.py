"""--model=package.module:function, the user's own model (tfbench.workloads.user): what is refused
before anything starts (one line, exit code 2, nothing written), what the check in a child
process finds, and that the README's example runs under every launcher's tasks, recorded as a user
model with where it came from."""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from tfrun import cluster_record, task_records

GOOD = "examples.custom_model:build"


def refused(tmp_path, spec, env=None) -> str:
    """`python -m tfbench --model=SPEC` from tmp_path: exit 2, one line, nothing written; that line."""
    logdir = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "tfbench", f"--model={spec}", f"--logdir={logdir}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (
                              ROOT, str(tmp_path), os.environ.get("PYTHONPATH")) if p), **(env or {})))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert not logdir.exists()
    return lines[0]


def module(tmp_path, name, source):
    (tmp_path / "mine").mkdir(exist_ok=True)
    (tmp_path / "mine" / f"{name}.py").write_text(textwrap.dedent(source))
    return f"mine.{name}:build"


def test_what_is_wrong_without_importing_anything_is_refused_at_once(tmp_path):
    """Spec form, a module not on the path, its syntax and a missing function need no import (the
    fast run's guard fails any test that imports TensorFlow)."""
    assert "neither a workload tfbench knows nor package.module:function" in refused(tmp_path, "mine/x.py:build")
    assert "no module mine.absent on the Python path" in refused(tmp_path, "mine.absent:build")
    spec = module(tmp_path, "broken", "def build(:\n    pass\n")
    assert "broken.py line 1" in refused(tmp_path, spec)
    spec = module(tmp_path, "other", "def make():\n    return None\n")
    assert refused(tmp_path, spec).endswith("other.py defines no build")


def test_the_readme_example_is_found_from_the_repository_root():
    from tfbench.workloads import user

    module_name, function, path, root = user.locate(GOOD)
    assert (module_name, function, root) == ("examples.custom_model", "build", ROOT)
    assert path == os.path.join(ROOT, "examples", "custom_model.py") and len(user.check_source(GOOD, path, function)) == 64


@pytest.mark.slow
def test_a_module_that_fails_when_imported_or_called_is_refused_by_the_child_check(tmp_path):
    """The launcher's check runs the user's code in a child process (TensorFlow stays out of the launcher)."""
    spec = module(tmp_path, "raises", "import tf_keras\nraise RuntimeError('no GPU here')\ndef build():\n    pass\n")
    assert refused(tmp_path, spec) == (f"tfbench: error: --model={spec}: importing mine.raises failed: "
                                       f"RuntimeError: no GPU here")


@pytest.mark.slow
@pytest.mark.parametrize("returns,says", [
    ("None", "must return (model, declaration dict), got a builtins.NoneType"),
    ("(model, {'inputs': 'video'})", "inputs 'video' is unknown; declare images, tokens or a dict of tensor specs"),
    ("(model, {'inputs': 'images', 'image_size': 32})", "classes must be an integer of at least 2, got None"),
    ("(model, {'inputs': 'images', 'image_size': 16, 'classes': 10})", "a forward pass and loss of the declared "
                                                                       "inputs failed"),
    ("(model, {'inputs': {'x': {'shape': [32, 32, 3]}}, 'labels': {'shape': [], 'dtype': 'int32', 'max': 10}, "
     "'unit': 'frames'})", "unit 'frames' is unknown"),
    ("(keras3, {'inputs': 'images', 'image_size': 32, 'classes': 10})", "a Keras 3 model: build it with "
                                                                        "`import tf_keras as keras`"),
])
def test_bad_returns_are_one_line_each(tmp_path, monkeypatch, returns, says):
    """The child's check itself, here in pytest's process (one TensorFlow import for every case)."""
    from tfbench.workloads import WorkloadError, user

    spec = module(tmp_path, f"returns_{len(os.listdir(tmp_path))}_{abs(hash(returns))}", f"""
        import tf_keras as keras


        def build():
            model = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Flatten(), keras.layers.Dense(10)])
            keras3 = type("Model", (), {{"__module__": "keras.src.models.model"}})()
            return {returns}
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(WorkloadError) as error:
        user.check(spec)
    assert says in str(error.value) and "\n" not in str(error.value)


@pytest.mark.slow
def test_declarations_of_tokens_and_tensor_specs_make_batches_of_their_shape(tmp_path, monkeypatch):
    from tfbench.config import RunConfig
    from tfbench.workloads import user

    spec = module(tmp_path, "specs", """
        import tf_keras as keras


        def build():
            x, ids = keras.Input((8,), name="x"), keras.Input((4,), dtype="int32", name="ids")
            hidden = keras.layers.Concatenate()([x, keras.layers.Flatten()(keras.layers.Embedding(50, 2)(ids))])
            model = keras.Model({"x": x, "ids": ids}, keras.layers.Dense(1)(hidden))
            return model, {"inputs": {"x": {"shape": [8], "dtype": "float32"},
                                      "ids": {"shape": [4], "dtype": "int32", "max": 50}},
                           "labels": {"shape": [1], "dtype": "float32"}, "loss": "mean_squared_error",
                           "unit": "examples"}
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    workload = user.load(spec)
    config = RunConfig(model=spec)
    assert workload.unit == "examples" and workload.units_per_example(config) == 1
    features, labels = workload.batch(config, 3, shard=1)
    assert features["x"].shape == (3, 8) and features["ids"].shape == (3, 4) and labels.shape == (3, 1)
    assert int(features["ids"].numpy().max()) < 50
    assert workload.per_example_loss(labels, workload.build(config)(features)).shape == (3,)
    tokens = user.normalised("t:b", {"inputs": "tokens", "seq_length": 12, "vocab_size": 100})
    assert tokens["unit"] == "tokens" and tokens["units_per_example"] == 12
    ids, per_token = user.UserWorkload.make_batch(tokens, 2, 0, 0)
    assert ids.shape == (2, 12) and per_token.shape == (2, 12)


@pytest.mark.slow
def test_the_example_runs_on_every_horovod_rank_and_says_it_is_a_user_model(clusters):
    """The shared Horovod run (horovodrun's ranks import the module through PYTHONPATH); the
    parameter-server and MultiWorkerMirrored runs of README's section are measured there."""
    launched = clusters["horovod_fp16_hard"]
    tasks = task_records(launched.run)
    for name in ("worker_0", "worker_1"):
        workload = tasks[name]["workload"]
        assert workload["kind"] == "user" and workload["name"] == GOOD
        origin = workload["user_model"]
        assert origin["file"] == os.path.join(ROOT, "examples", "custom_model.py") and origin["import_root"] == ROOT
        assert origin["model_name"] == "custom_resnet" and origin["params"] > 0 and len(origin["sha256"]) == 64
        assert workload["declaration"]["inputs"] == "images" and workload["declaration"]["image_size"] == 32
    assert cluster_record(launched.run)["workload"]["user_model"]["spec"] == GOOD
    assert "user model images 32px, 10 classes" in launched.out
