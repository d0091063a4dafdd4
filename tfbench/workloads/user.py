"""The user's own model: --model=package.module:function.

The function takes no arguments and returns `(model, declaration)`: a tf_keras model and a dict
that says what it reads and how it learns (README, "Your own model"; examples/custom_model.py):

    {"inputs": "images", "image_size": 32, "classes": 10}          images in [0, 1), class labels
    {"inputs": "tokens", "seq_length": 64, "vocab_size": 1000}     token ids; labels per token, or
                                                                   per sequence with "classes"
    {"inputs": {"x": {"shape": [8], "dtype": "float32"},           a dict of tensor specs (one
                "ids": {"shape": [4], "dtype": "int32", "max": 50}},  example; ints uniform below max),
     "labels": {"shape": [], "dtype": "int32", "max": 2},
     "unit": "examples", "units_per_example": 1}                   and the unit its rate counts
    plus "loss": a Keras loss name (crossentropies take logits; default
    sparse_categorical_crossentropy) or a callable (labels, outputs) -> a loss per example.

Checked before anything starts, in two steps. Without importing anything: the spec's form, the
module's file on the Python path, its syntax, the function defined at its top level. Then in a
child process (`python -m tfbench.workloads.user_check SPEC`, as tfbench.measure.memory counts, so the
launcher never imports TensorFlow): the import, the call, the return value, the declaration, and
one forward pass and loss on two synthetic examples. Any failure is one line (WorkloadError: exit
code 2). A process that has TensorFlow already (a task) loads the module itself. The directory
the module was found under goes to every task through PYTHONPATH (import_paths()), and the
records name the spec, the file, its SHA-256 and the declaration.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from typing import Dict, Optional, Tuple

from tfbench.workloads.base import UNITS, Workload, WorkloadError, WorkloadKind, need

SPEC = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*)$")
KINDS = ("images", "tokens", "a dict of tensor specs")
DTYPES = ("float32", "int32")
LOGITS_LOSSES = ("sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy")
DEFAULT_LOSS = "sparse_categorical_crossentropy"
CHECK_TIMEOUT_S = 600


def is_spec(name: str) -> bool:
    """--model names a user's function (package.module:function) rather than a registered workload."""
    return ":" in name


# ---- without importing anything ---------------------------------------------------------------
def locate(spec: str) -> Tuple[str, str, str, str]:
    """(module, function, its file, the directory it was found under) for `package.module:function`,
    searched on sys.path as the import would, without importing any of it."""
    match = SPEC.match(spec)
    need(bool(match), f"--model={spec!r} is neither a workload tfbench knows nor package.module:function")
    module, function = match.group(1), match.group(2)
    parts = module.split(".")
    for entry in sys.path:
        root = os.path.abspath(entry or os.getcwd())
        for path in (os.path.join(root, *parts) + ".py", os.path.join(root, *parts, "__init__.py")):
            if os.path.isfile(path):
                return module, function, path, root
    raise WorkloadError(f"--model={spec}: no module {module} on the Python path (run from the directory that "
                        f"holds {parts[0]}, or add that directory to PYTHONPATH)")


def check_source(spec: str, path: str, function: str) -> str:
    """The module's SHA-256 after checking its syntax and that it defines `function` at top level."""
    with open(path, "rb") as f:
        source = f.read()
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        raise WorkloadError(f"--model={spec}: {path} line {e.lineno}: {e.msg}") from None
    names, star = set(), False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            star |= any(a.name == "*" for a in node.names)
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    need(star or function in names, f"--model={spec}: {path} defines no {function}")
    return hashlib.sha256(source).hexdigest()


# ---- the declaration, checked with TensorFlow ----------------------------------------------------
def load_declared(spec: str):
    """(model, declaration) from calling the user's function in this process, every part checked."""
    import importlib

    from tfbench.framework.tf_import import keras

    module, function = spec.split(":")
    try:
        loaded = importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - whatever the user's import raises is reported in one line
        raise WorkloadError(f"--model={spec}: importing {module} failed: {_one_line(e)}") from None
    build = getattr(loaded, function, None)
    need(callable(build), f"--model={spec}: {module}.{function} is not a function")
    try:
        returned = build()
    except Exception as e:  # noqa: BLE001
        raise WorkloadError(f"--model={spec}: {function}() raised {_one_line(e)}") from None
    need(isinstance(returned, tuple) and len(returned) == 2 and isinstance(returned[1], dict),
         f"--model={spec}: {function}() must return (model, declaration dict), got {_kind_of(returned)}")
    model, declared = returned
    if not isinstance(model, keras.Model):
        keras3 = type(model).__module__.split(".")[0] == "keras"
        raise WorkloadError(f"--model={spec}: {function}() returned {_kind_of(model)} as its model, not a tf_keras "
                            f"model" + (" (a Keras 3 model: build it with `import tf_keras as keras`)" if keras3
                                        else ""))
    return model, declared


def normalised(spec: str, declared: dict) -> dict:
    """The declaration with its defaults, as JSON; WorkloadError for an unknown kind or a bad size."""
    where = f"--model={spec}: the declaration's"
    inputs = declared.get("inputs")
    loss = declared.get("loss", DEFAULT_LOSS)
    out = {"loss": loss if isinstance(loss, str) else "callable " + getattr(loss, "__name__", type(loss).__name__)}
    need(isinstance(loss, str) or callable(loss), f"{where} loss must be a Keras loss name or a callable")
    if inputs == "images":
        out.update(inputs="images", unit="images", units_per_example=1,
                   image_size=_positive(declared, "image_size", where), classes=_positive(declared, "classes", where, 2))
    elif inputs == "tokens":
        length = _positive(declared, "seq_length", where)
        out.update(inputs="tokens", unit="tokens", units_per_example=length, seq_length=length,
                   vocab_size=_positive(declared, "vocab_size", where, 2))
        if "classes" in declared:
            out["classes"] = _positive(declared, "classes", where, 2)
    elif isinstance(inputs, dict) and inputs:
        unit = declared.get("unit", "examples")
        need(unit in UNITS, f"{where} unit {unit!r} is unknown; choose one of {', '.join(UNITS)}")
        out.update(inputs={name: _tensor(where, name, s) for name, s in inputs.items()},
                   labels=_tensor(where, "labels", declared.get("labels")), unit=unit,
                   units_per_example=_positive(declared, "units_per_example", where, 1, default=1))
    else:
        raise WorkloadError(f"{where} inputs {inputs!r} is unknown; declare images, tokens or a dict of tensor "
                            f"specs ({{name: {{'shape': [...], 'dtype': 'float32'}}}})")
    return out


def _positive(declared: dict, key: str, where: str, least: int = 1, default=None) -> int:
    value = declared.get(key, default)
    need(isinstance(value, int) and not isinstance(value, bool) and value >= least,
         f"{where} {key} must be an integer of at least {least}, got {value!r}")
    return value


def _tensor(where: str, name: str, spec) -> dict:
    need(isinstance(spec, dict), f"{where} {name} must be a dict with shape and dtype, got {spec!r}")
    shape, dtype = spec.get("shape"), spec.get("dtype", "float32")
    need(isinstance(shape, (list, tuple)) and all(isinstance(d, int) and d > 0 for d in shape),
         f"{where} {name} shape must be a list of positive integers (one example), got {shape!r}")
    need(dtype in DTYPES, f"{where} {name} dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    out = {"shape": list(shape), "dtype": dtype}
    if dtype != "float32":
        out["max"] = _positive(spec, "max", f"{where} {name}", 1)
    return out


def check(spec: str, forward: bool = True) -> dict:
    """Everything a launcher needs to know of the user's model, every part checked (TensorFlow in
    this process): the declaration, the model's name and parameters, and (`forward`) a forward
    pass and loss of two synthetic examples."""
    model, declared = load_declared(spec)
    decl = normalised(spec, declared)
    if forward:
        features, labels = UserWorkload.make_batch(decl, 2, 0, 0)
        try:
            loss = UserWorkload.loss_of(decl, declared.get("loss", DEFAULT_LOSS))(labels, model(features, training=False))
        except Exception as e:  # noqa: BLE001 - the user's model and loss: one line
            raise WorkloadError(f"--model={spec}: a forward pass and loss of the declared inputs failed: "
                                f"{_one_line(e)}") from None
        need(tuple(loss.shape) == (2,), f"--model={spec}: the loss of a batch of 2 has shape {tuple(loss.shape)}, "
                                        f"not one value per example")
    return {"declaration": decl, "model_name": model.name,
            "params": int(sum(v.shape.num_elements() for v in model.trainable_variables))}


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _kind_of(value) -> str:
    return f"a {type(value).__module__}.{type(value).__name__}"


@functools.lru_cache(maxsize=16)
def _checked(spec: str, sha256: str, root: str) -> dict:
    """check(spec) in a child process; a process with TensorFlow imported already (a task, whose
    launcher checked the whole) loads the declaration itself, without the forward pass."""
    if "tensorflow" in sys.modules:
        return check(spec, forward=False)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    try:
        proc = subprocess.run([sys.executable, "-m", "tfbench.workloads.user_check", spec], capture_output=True,
                              text=True, timeout=CHECK_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise WorkloadError(f"--model={spec}: checking the model took more than {CHECK_TIMEOUT_S} s") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise WorkloadError(tail.removeprefix("tfbench: error: "))
    return json.loads(lines[-1])


def load(spec: str) -> "UserWorkload":
    """The user's workload, checked (see the module docstring)."""
    module, function, path, root = locate(spec)
    sha256 = check_source(spec, path, function)
    facts = _checked(spec, sha256, root)
    decl = facts["declaration"]
    return UserWorkload(spec, f"user model {facts['model_name']} ({facts['params']:,} parameters) from {path}",
                        unit=decl["unit"], inputs=_inputs_text(decl), reads_files=decl["inputs"] == "images",
                        decl=decl, origin={"spec": spec, "module": module, "function": function, "file": path,
                                           "import_root": root, "sha256": sha256, "model_name": facts["model_name"],
                                           "params": facts["params"]})


def _inputs_text(decl: dict) -> str:
    if decl["inputs"] == "images":
        return f"images {decl['image_size']}px, {decl['classes']} classes"
    if decl["inputs"] == "tokens":
        return f"tokens={decl['seq_length']}/sequence"
    return "inputs " + ", ".join(f"{n}{s['shape']} {s['dtype']}" for n, s in decl["inputs"].items())


@dataclasses.dataclass(frozen=True)
class UserWorkload(Workload):
    """A user's model (see the module docstring); `decl` is its normalised declaration."""

    kind: str = "user"
    decl: Optional[dict] = dataclasses.field(default=None, hash=False, compare=False)
    origin: Optional[dict] = dataclasses.field(default=None, hash=False, compare=False)

    def check(self, config) -> None:
        need(config.data_format == "NHWC", f"--data_format={config.data_format}: a user model reads NHWC images")

    def units_per_example(self, config) -> int:
        return self.decl["units_per_example"]

    def describe(self, config) -> str:
        return f"user model {self.inputs}"

    def key(self, config) -> str:
        return f"user|{self.name}|{self.origin['sha256'][:16]}"

    def record(self, config) -> Dict:
        return {"user_model": dict(self.origin), "declaration": dict(self.decl)}

    def import_paths(self) -> Tuple[str, ...]:
        return (self.origin["import_root"],)

    def build(self, config):
        model, declared = load_declared(self.name)
        _losses[self.name] = declared.get("loss", DEFAULT_LOSS)
        return model

    def batch(self, config, batch_size: int, shard=0) -> Tuple:
        return self.make_batch(self.decl, batch_size, config.seed, shard)

    @staticmethod
    def make_batch(decl: dict, batch_size: int, seed: int, shard) -> Tuple:
        """(features, labels) of `batch_size` synthetic examples: floats uniform in [0, 1), ids and
        labels uniform below their maximum; deterministic per (seed, shard)."""
        from tfbench.framework.tf_import import tf

        shard = tf.cast(shard, tf.int64)
        draws = []

        def draw(shape, dtype="float32", top=None):
            key = tf.stack([tf.constant(seed, tf.int64), 16 * shard + len(draws)])
            draws.append(key)
            if dtype == "float32":
                return tf.random.stateless_uniform([batch_size, *shape], seed=key)
            return tf.random.stateless_uniform([batch_size, *shape], seed=key, minval=0, maxval=top, dtype=tf.int32)

        if decl["inputs"] == "images":
            size = decl["image_size"]
            return draw([size, size, 3]), draw([], "int32", decl["classes"])
        if decl["inputs"] == "tokens":
            ids = draw([decl["seq_length"]], "int32", decl["vocab_size"])
            if "classes" in decl:
                return ids, draw([], "int32", decl["classes"])
            return ids, draw([decl["seq_length"]], "int32", decl["vocab_size"])
        features = {n: draw(s["shape"], s["dtype"], s.get("max")) for n, s in decl["inputs"].items()}
        labels = decl["labels"]
        return features, draw(labels["shape"], labels["dtype"], labels.get("max"))

    def dataset(self, config, shard, num_shards: int, batch_size: int, cores: int = 1):
        from tfbench.data import records

        return records.dataset(config, shard, num_shards, batch_size, self.decl["image_size"], cores)

    def example_spec(self, config) -> Tuple:
        from tfbench.framework.tf_import import tf

        features, labels = self.make_batch(self.decl, 1, 0, 0)
        return (tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), features),
                tf.TensorSpec(labels.shape, labels.dtype))

    def per_example_loss(self, labels, outputs):
        return self.loss_of(self.decl, _losses.get(self.name, self.decl["loss"]))(labels, outputs)

    @staticmethod
    def loss_of(decl: dict, loss):
        """(labels, outputs) -> one fp32 loss per example from a Keras loss name or the user's callable."""
        from tfbench.framework.tf_import import keras, tf

        if isinstance(loss, str):
            name = loss
            function = keras.losses.get(name)
            loss = ((lambda y, p: function(y, p, from_logits=True)) if name in LOGITS_LOSSES else function)

        def per_example(labels, outputs):
            value = tf.cast(loss(labels, tf.cast(outputs, tf.float32)), tf.float32)
            return tf.reduce_mean(value, axis=list(range(1, value.shape.rank))) if value.shape.rank > 1 else value

        return per_example


_losses: Dict[str, object] = {}  # the user's loss as their function last returned it (a callable is not JSON)
KIND = WorkloadKind("user", "or your own model as package.module:function (README: Your own model)")
