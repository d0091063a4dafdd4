"""The end-of-run hint: a TensorBoard command that works as printed, and the page to open.

A bare `tensorboard` is not on PATH in a fresh clone (it lives in the environment tfbench runs
from, .venv/bin), so the command names the executable beside the interpreter that ran tfbench,
or that interpreter with `-m tensorboard.main` when there is none. TensorBoard opens on its Time
Series tab; the run's custom-scalars layout (step time of every worker, traffic of every host,
CPU of every task: tfbench.tensorboard.layout) is one tab further, so the hint gives its URL.
"""
from __future__ import annotations

import os
import shlex
import sys
from typing import List

PORT = 6006  # TensorBoard's default
PAGE = "custom_scalars"


def command(logdir: str) -> List[str]:
    """The argv that serves `logdir` with the TensorBoard of this Python environment."""
    beside = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    if os.access(beside, os.X_OK):
        return [beside, "--logdir", logdir]
    return [sys.executable, "-m", "tensorboard.main", "--logdir", logdir]


def url(port: int = PORT) -> str:
    return f"http://localhost:{port}/#{PAGE}"


def text(logdir: str) -> str:
    """What a run prints at its end (and cluster.merge after merging)."""
    return (f"tensorboard: {shlex.join(command(logdir))}\n"
            f"  then open {url()} (step time of every worker, traffic of every host, CPU of every task)")
