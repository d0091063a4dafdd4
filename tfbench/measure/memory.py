"""Will the run fit in this machine's memory? An estimate made before any task starts.

A batch that cannot fit used to fail inside a task ("Resource exhausted", or the kernel's OOM
killer) after every task had imported TensorFlow and built its model. The estimate adds, per
task the launcher would start on this machine:

- the TensorFlow runtime of one process (RUNTIME_BYTES; a tiny-model task peaks near it here);
- weights: every task that builds the model holds |w| (the PS coordinator and workers read the
  ps' copy but keep their own gradients, |w| again); a ps holds its share of |w| and the
  optimizer's share;
- activations: train keeps every float output of the forward pass for the backward pass (the
  floats of one image's forward graph x images per step; their gradients are transient);
  forward needs about the largest op's input, output and workspace (3 x its output x images).

Checked here: ResNet50 trained at 64 px, batch 64, one task: estimated 1.86 GB, measured peak
RSS 1.71 GB.

Counts come from the model's own graph at batch 1 (count_model, cached per model, image size,
classes and layout like the FLOP counts), in a child process so that the launcher never imports
TensorFlow; a dry run counts nothing and says when only a count could tell. It is an estimate, meant to refuse the hopeless (more than the machine has), not to
pack memory tightly.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, Iterable, Optional

from tfbench.config.errors import ConfigError
from tfbench.measure import json_cache

RUNTIME_BYTES = 600 * 10 ** 6  # one TensorFlow process with a tiny model: ~400-600 MB RSS here
GB = 10 ** 9
CACHE_ENV = "TFBENCH_MODEL_MEMORY_CACHE"
FIGURES = ("params", "variables", "activation_floats", "largest_floats")  # what count_model returns


def cache_path() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "tfbench", "model_memory.json")


def _key(model: str, image_size: int, num_classes: int, data_format: str) -> str:
    return f"{model}|{image_size}px|{num_classes} classes|{data_format}"


def count_model(model: str, image_size: int, num_classes: int, data_format: str) -> Dict[str, int]:
    """{'params', 'variables', 'activation_floats', 'largest_floats'}: trainable parameters and
    variables (the performance model's |w| and its variables), and per image the float outputs
    of every op of the training-mode forward graph at batch 1 that depends on the images."""
    from tfbench.framework.tf_import import tf
    from tfbench.models import MODELS
    from tfbench.models.layout import input_shape

    graph = tf.Graph()
    with graph.as_default():
        model_ = MODELS[model].build(num_classes, image_size, data_format)
        images = tf.compat.v1.placeholder(tf.float32, (1, *input_shape(image_size, data_format)))
        model_(images, training=True)
        sizes = [out.shape.num_elements() for op in _downstream(images.op) for out in op.outputs
                 if out.dtype.is_floating and out.shape.is_fully_defined()]
        params = int(sum(v.shape.num_elements() for v in model_.trainable_variables))
        variables = len(model_.trainable_variables)
    return {"params": params, "variables": variables, "activation_floats": int(sum(sizes)),
            "largest_floats": int(max(sizes, default=0))}


def _downstream(source) -> list:
    """The ops that depend on `source` (the images): activations, never weights, initializers
    or the moving-statistics updates, which do not scale with the batch."""
    seen, stack = {source}, [source]
    while stack:
        for out in stack.pop().outputs:
            for consumer in out.consumers():
                if consumer not in seen:
                    seen.add(consumer)
                    stack.append(consumer)
    seen.discard(source)
    return list(seen)


def counts(model: str, image_size: int, num_classes: int, data_format: str = "NHWC") -> Dict[str, int]:
    """count_model's figures, from the cache or counted now in a child process (the launcher
    never imports TensorFlow, and TensorFlow's start-up logs stay in the child's stderr)."""
    key = _key(model, image_size, num_classes, data_format)
    cached = cached_counts(model, image_size, num_classes, data_format)
    if cached:
        return cached
    proc = subprocess.run([sys.executable, "-m", "tfbench.measure.memory", model, str(image_size), str(num_classes),
                           data_format], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"could not count {model}'s memory before starting: {tail}")
    value = json.loads(proc.stdout.strip().splitlines()[-1])
    _write_cache(key, value)
    return value


def cached_counts(model: str, image_size: int, num_classes: int, data_format: str = "NHWC") -> Optional[Dict[str, int]]:
    """The cached figures, or None; an entry cached before a figure was added to count_model
    (one without 'variables') counts as none, so it is counted again."""
    cached = _read_cache().get(_key(model, image_size, num_classes, data_format))
    return cached if cached and all(name in cached for name in FIGURES) else None


def _read_cache() -> dict:
    return json_cache.read(cache_path())


def _write_cache(key: str, value: dict) -> None:
    json_cache.write(cache_path(), key, value)


def task_bytes(role: str, config, model: Dict[str, int], images_per_step: int) -> int:
    """Estimated peak bytes of one task (see the module docstring)."""
    weights = 4 * model["params"]
    if role == "ps":
        return RUNTIME_BYTES + 2 * weights // max(1, config.effective_num_ps)
    if config.mode == "train":
        activations = 4 * model["activation_floats"] * images_per_step
        return RUNTIME_BYTES + 2 * weights + activations
    return RUNTIME_BYTES + weights + 3 * 4 * model["largest_floats"] * images_per_step


def estimate(config, roles: Iterable[str], model: Dict[str, int]) -> Dict[str, int]:
    """{'total', 'largest_task', 'tasks'}: bytes of the tasks with these roles on this machine."""
    local = max(1, config.num_local_devices) if not config.traits.multi_task else 1
    images = config.batch_size * local
    sizes = [task_bytes(role, config, model, 0 if role == "chief" and config.traits.has_ps
                        else images) for role in roles]
    return {"total": sum(sizes), "largest_task": max(sizes, default=0), "tasks": len(sizes)}


def available_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


# Bounds that hold for every registered model (checked against their counts by the tests):
# below them no count is needed, which spares small runs a TensorFlow import before they start.
BOUND_PARAMS = 60 * 10 ** 6  # parameters besides the classifier (ResNet50 23.5 M, AlexNet 46.7 M)
BOUND_FEATURES = 4096  # inputs of the classifier (ResNet50 2048, AlexNet 4096)
BOUND_FLOATS_PER_PIXEL = 1300  # forward activations per input pixel (ResNet50: 952 at 224 px, 1164 at 32)


def bound(config, roles) -> Dict[str, int]:
    """estimate() of a model at every bound above: no run of a registered model needs more."""
    pixels = config.image_size * config.image_size
    model = {"params": BOUND_PARAMS + (BOUND_FEATURES + 1) * config.num_classes,
             "activation_floats": BOUND_FLOATS_PER_PIXEL * pixels, "largest_floats": BOUND_FLOATS_PER_PIXEL * pixels}
    return estimate(config, roles, model)


def check(config, roles, available: Optional[int] = None, model: Optional[Dict[str, int]] = None,
          count: bool = True) -> Dict[str, int]:
    """Raises ConfigError (one line, with the estimate) when the tasks cannot fit; else the
    estimate (the bound when that already fits).

    count=False (--dry_run, which starts no process and writes nothing): when only a count of the
    model's graph could tell and none is cached, nothing is counted; the result says so under
    'unchecked' and the real run counts before it starts anything."""
    roles = list(roles)
    have = available_bytes() if available is None else available
    if model is None:
        from tfbench.models import MODELS

        upper = bound(config, roles)
        if upper["total"] <= have and MODELS[config.model].bounded:
            return dict(upper, available=have, bound=True)
        model = cached_counts(config.model, config.image_size, config.num_classes, config.data_format)
        if model is None and not count:
            return dict(upper, available=have, unchecked=(
                f"not counted in a dry run: the bound for any model, {upper['total'] / GB:.1f} GB, is more than the "
                f"{have / GB:.1f} GB available, and only a count of {config.model}'s graph (TensorFlow, a child "
                f"process) can tell; the run counts it before starting anything and refuses a batch that does not fit"))
        model = model or counts(config.model, config.image_size, config.num_classes, config.data_format)
    est = estimate(config, roles, model)
    if est["total"] > have:
        per_image = 4 * model["activation_floats"] if config.mode == "train" else 3 * 4 * model["largest_floats"]
        raise ConfigError(
            f"--batch_size={config.batch_size} does not fit: {est['tasks']} task(s) need about "
            f"{est['total'] / GB:.1f} GB ({config.model} {config.image_size}px {config.mode}: "
            f"{model['params'] / 1e6:.1f} M parameters, {per_image / 1e6:.1f} MB of activations per image, "
            f"{RUNTIME_BYTES / GB:.1f} GB of runtime per task) and this machine has {have / GB:.1f} GB available; "
            f"lower --batch_size or --image_size")
    return dict(est, available=have)


def describe(result: Dict[str, int]) -> str:
    """The dry run's line about memory."""
    if result.get("unchecked"):
        return f"memory: {result['unchecked']}"
    if result.get("bound"):
        return (f"memory: at most {result['total'] / GB:.1f} GB for {result['tasks']} task(s) (the bound for any "
                f"model at this batch and image size), {result['available'] / GB:.1f} GB available")
    return (f"memory: about {result['total'] / GB:.1f} GB for {result['tasks']} task(s) (counted from the model's "
            f"graph), {result['available'] / GB:.1f} GB available")


def main(argv) -> int:
    model, image_size, num_classes, data_format = argv[1], int(argv[2]), int(argv[3]), argv[4]
    print(json.dumps(count_model(model, image_size, num_classes, data_format)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
