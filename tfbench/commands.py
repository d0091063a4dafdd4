"""The commands `pip install` puts on the PATH (pyproject.toml's [project.scripts]).

Each command runs the `python -m` module it stands for, as `python -m` runs it (runpy, as
__main__), so a command and its module take the same flags, print the same --help and end with
the same exit codes; the modules keep no second entry function.
"""
from __future__ import annotations

import runpy
from typing import Callable


def _command(module: str) -> Callable[[], None]:
    def run() -> None:
        runpy.run_module(module, run_name="__main__", alter_sys=True)

    run.__doc__ = f"`python -m {module}`"
    return run


tfbench = _command("tfbench")
sweep = _command("tools.sweep")
report = _command("tools.report")
model = _command("tools.model")
bench = _command("tools.bench")
by_hand = _command("cluster.by_hand")
k8s = _command("cluster.k8s")
merge = _command("cluster.merge")
