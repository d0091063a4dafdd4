"""A model's variables as a parameter-server strategy sees them: name, shape, bytes per element
and trainable, in the order they are created (the order ParameterServerStrategy places them in,
tfbench.perfmodel.dense.shards).

Counted by building the model under tf.variable_creator_scope, which sees every variable the
model creates, non-trainable ones (moving statistics) included, in creation order. Building a
large model takes seconds to a minute, so a count is cached beside the model's memory counts
(~/.cache/tfbench/model_variables.json) and some are shipped with tfbench
(tfbench/measure/data/variables_*.json, written by `python -m tfbench.measure.variables --ship`);
the launcher and tools.model never import TensorFlow themselves: the count runs in a child.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, List, Optional

from tfbench.config.errors import ConfigError
from tfbench.measure import json_cache

CACHE_ENV = "TFBENCH_MODEL_VARIABLES_CACHE"
SHIPPED = os.path.join(os.path.dirname(__file__), "data")


def cache_path() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "tfbench",
                                                     "model_variables.json")


def key(model: str, image_size: int, num_classes: int) -> str:
    return f"{model}|{image_size}px|{num_classes} classes"


def shipped_path(model: str, image_size: int, num_classes: int) -> str:
    return os.path.join(SHIPPED, f"variables_{model}_{image_size}px_{num_classes}.json")


def count_variables(model: str, image_size: int, num_classes: int, data_format: str = "NHWC") -> List[Dict]:
    """[{'name', 'shape', 'itemsize', 'trainable'}] in creation order (TensorFlow; call in a child).
    Any registered workload (an image model, a transformer preset at its own sizes)."""
    from tfbench.config import RunConfig
    from tfbench.framework.tf_import import tf

    config = RunConfig(model=model, image_size=image_size, num_classes=num_classes, data_format=data_format)

    created = []

    def record(next_creator, **kwargs):
        v = next_creator(**kwargs)
        created.append(v)
        return v

    with tf.variable_creator_scope(record):
        built = config.workload.build(config)
    # trainable: what the model trains (Keras' own step counters are tf.Variables too, never pulled)
    trained = {v.ref() for v in built.trainable_variables}
    return [{"name": v.name.rsplit(":", 1)[0], "shape": [int(d) for d in v.shape], "itemsize": int(v.dtype.size),
             "trainable": v.ref() in trained} for v in created]


def shipped(model: str, image_size: int, num_classes: int) -> Optional[List[Dict]]:
    try:
        with open(shipped_path(model, image_size, num_classes), encoding="utf-8") as f:
            return json.load(f)["variables"]
    except (OSError, ValueError, KeyError):
        return None


def variables(model: str, image_size: int, num_classes: int) -> List[Dict]:
    """The variables: shipped, cached, or counted now in a child process (and cached)."""
    found = shipped(model, image_size, num_classes) or json_cache.read(cache_path()).get(
        key(model, image_size, num_classes))
    if found:
        return found
    proc = subprocess.run([sys.executable, "-m", "tfbench.measure.variables", model, str(image_size),
                           str(num_classes)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"could not count {model}'s variables: {tail}")
    value = json.loads(proc.stdout.strip().splitlines()[-1])
    json_cache.write(cache_path(), key(model, image_size, num_classes), value)
    return value


def main(argv) -> int:
    """python -m tfbench.measure.variables MODEL IMAGE_SIZE NUM_CLASSES [--ship]"""
    model, image_size, num_classes = argv[1], int(argv[2]), int(argv[3])
    counted = count_variables(model, image_size, num_classes)
    if "--ship" in argv:
        os.makedirs(SHIPPED, exist_ok=True)
        with open(shipped_path(model, image_size, num_classes), "w", encoding="utf-8") as f:
            json.dump({"model": model, "image_size": image_size, "num_classes": num_classes,
                       "counted_by": "python -m tfbench.measure.variables --ship (tf.variable_creator_scope)",
                       "variables": counted}, f, indent=1)
            f.write("\n")
    print(json.dumps(counted), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
