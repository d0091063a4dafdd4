"""One adapter per distribution strategy behind one interface (strategies.base.StrategyAdapter).

`create(config, task, plan, run_dir)` turns a strategy name into its adapter, the class its row
of the traits table names (tfbench.config.strategy_traits: the one list of strategies), and
fails loudly on unknown names, like tensorflow/models' distribute_utils.
"""
from __future__ import annotations

import importlib

from tfbench.config import strategy_traits


def adapter_class(name: str):
    module, cls = strategy_traits.of(name).adapter.split(":")
    return getattr(importlib.import_module(module), cls)


def create(config, task, plan, run_dir=None):
    """The adapter for `config.strategy`, set up for this task (TensorFlow already configured);
    `run_dir` (a RunDir) is where it may write files of its own (checkpoints, logs)."""
    return adapter_class(config.strategy)(config, task, plan, run_dir)
