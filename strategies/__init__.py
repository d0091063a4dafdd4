"""One adapter per distribution strategy behind one interface (strategies.base.StrategyAdapter).

`create(config, task, plan, run_dir)` turns a strategy name into its adapter, the class its row
of the traits table names (tfbench.config.strategy_traits: the one list of strategies), and
fails loudly on unknown names, like tensorflow/models' distribute_utils; `serve(config, task,
on_ready)` runs a service task (a ps, a coordinator's worker) with the function the row names.
"""
from __future__ import annotations

import importlib

from tfbench.config import strategy_traits


def _named(path: str):
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def adapter_class(name: str):
    return _named(strategy_traits.of(name).adapter)


def serve(config, task, on_ready) -> None:
    """A service task of the plan (TaskSpec.service): the server its strategy's row names, which
    other tasks drive or read; returns when it is stopped."""
    _named(strategy_traits.of(config.strategy).serves)(task, task.intra_threads, task.inter_threads, on_ready)


def create(config, task, plan, run_dir=None):
    """The adapter for `config.strategy`, set up for this task (TensorFlow already configured);
    `run_dir` (a RunDir) is where it may write files of its own (checkpoints, logs)."""
    return adapter_class(config.strategy)(config, task, plan, run_dir)
