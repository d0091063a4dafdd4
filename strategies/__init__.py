"""One module per distribution strategy behind one interface (strategies.base.StrategyAdapter).

`create(config, task, plan, run_dir)` turns a strategy name into an adapter and fails loudly on
unknown names, like tensorflow/models' distribute_utils.
"""
from __future__ import annotations

import importlib

from tfbench.config.errors import ConfigError

_ADAPTERS = {
    "default": "strategies.default:DefaultAdapter",
    "mirrored": "strategies.mirrored:MirroredAdapter",
    "multi_worker_mirrored": "strategies.multi_worker_mirrored:MultiWorkerMirroredAdapter",
    "parameter_server": "strategies.parameter_server:ParameterServerAdapter",
    "horovod": "strategies.horovod:HorovodAdapter",
}


def adapter_class(name: str):
    if name not in _ADAPTERS:
        raise ConfigError(f"unknown strategy {name!r}; choose one of {', '.join(_ADAPTERS)}")
    module, cls = _ADAPTERS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def create(config, task, plan, run_dir=None):
    """The adapter for `config.strategy`, set up for this task (TensorFlow already configured);
    `run_dir` (a RunDir) is where it may write files of its own (checkpoints, logs)."""
    return adapter_class(config.strategy)(config, task, plan, run_dir)
