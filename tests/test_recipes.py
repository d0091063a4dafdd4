"""docs/architecture.md's recipes (add a strategy, a launcher, a workload) name every file one would
touch: each existing strategy, launch kind and kind of workload is walked through its recipe, and
every file it occupies (its registry line, its own module, the modules its row names, its knobs'
fields, flags and checks, its model builder, its tests and sweep row) must be one the recipe names,
in the recipe's registry."""
import ast
import importlib
import inspect
import os
import re

import pytest

from conftest import ROOT, TINY
from cluster.launchers import registry
from tfbench import workloads
from tfbench.config import RunConfig, choices, knobs, kinds, strategy_traits

PATH = re.compile(r"`((?:tfbench|cluster|strategies|tools|tests)/[\w./<>-]*)`")


def recipe(title: str) -> str:
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    section = text.split("## Where to add", 1)[1]
    return section.split(f"**{title}**", 1)[1].split("\n**", 1)[0]


def named(text: str):
    """The recipe's paths, a template (`strategies/<name>.py`, `strategies/<name>/`) as a pattern."""
    out = []
    for path in PATH.findall(text):
        pattern = re.escape(path).replace(re.escape("<"), "<").replace(re.escape(">"), ">")
        pattern = re.sub(r"<[a-z]+>", r"[^/]+", pattern)
        out.append(re.compile(pattern + (".*" if path.endswith("/") else "") + "$"))
    return out


def file_of(module: str) -> str:
    path = os.path.join(*module.split("."))
    return path + ".py" if os.path.exists(os.path.join(ROOT, path + ".py")) else os.path.join(path, "__init__.py")


def mentions(rel: str, *words) -> bool:
    text = open(os.path.join(ROOT, rel), encoding="utf-8").read()
    return any(w in text for w in words)


def unnamed(title: str, touched) -> list:
    patterns = named(recipe(title))
    return sorted(f for f in touched if not any(p.match(f) for p in patterns))


@pytest.mark.parametrize("name", strategy_traits.STRATEGIES)
def test_a_strategy_occupies_only_files_its_recipe_names(name):
    traits = strategy_traits.of(name)
    touched = {"tfbench/config/strategy_traits.py", file_of(traits.adapter.split(":")[0])}
    touched |= {file_of(traits.serves.split(":")[0])} if traits.serves else set()
    if traits.knobs:
        touched |= {"tfbench/config/run_config.py", "tfbench/config/flags.py"}
        source = inspect.getsource(knobs.check)
        touched |= {"tfbench/config/knobs.py"} if any(f"c.{k.name}" in source for k in traits.knobs) else set()
    # its run: a scenario of tests/clusters.py (the default strategy's has no flag), which
    # tests/test_strategies.py reads, and a point of `make strategies`
    assert mentions("tests/clusters.py", f"--strategy={name}") or name == RunConfig().strategy
    assert re.search(rf"^strategy: \[.*\b{name}\b", open(os.path.join(ROOT, "tools/sweeps/strategies.yaml")).read(),
                     re.MULTILINE), f"tools/sweeps/strategies.yaml runs no {name}"
    touched |= {"tests/clusters.py", "tests/test_strategies.py", "tools/sweeps/strategies.yaml"}
    assert not unnamed("A strategy", touched), unnamed("A strategy", touched)
    assert "`TRAITS`" in recipe("A strategy") and name in strategy_traits.TRAITS


@pytest.mark.parametrize("name", sorted(registry.BEHAVIOURS))
def test_a_launch_kind_occupies_only_files_its_recipe_names(name):
    behaviour = registry.BEHAVIOURS[name]
    touched = {"tfbench/config/kinds.py", "cluster/launchers/registry.py"}
    if behaviour.launcher:
        touched.add(file_of(behaviour.launcher.split(":")[0]))
        kind = kinds.KINDS[name]
        assert kind.engine in ("tfbench", "slurm")
        touched.add("tfbench/config/choices.py")  # the --launcher and --network values that select it
        assert set(choices.LAUNCHERS) | set(choices.NETWORKS) >= {"local", "slurm", "emulated"}
    if behaviour.dry_run:
        touched.add("cluster/launchers/dry_run.py")
        assert hasattr(importlib.import_module("cluster.launchers.dry_run"), behaviour.dry_run)
    if "preflight." in inspect.getsource(behaviour.checks):
        touched.add("cluster/launchers/preflight.py")
    assert not unnamed("A launcher", touched), unnamed("A launcher", touched)
    assert "`BEHAVIOURS`" in recipe("A launcher") and "`KINDS`" in recipe("A launcher")


@pytest.mark.parametrize("kind", workloads.KINDS, ids=[k.name for k in workloads.KINDS])
def test_a_kind_of_workload_occupies_only_files_its_recipe_names(kind):
    module = next((type(w).__module__ for w in kind.workloads.values()), f"tfbench.workloads.{kind.name}")
    touched = {"tfbench/workloads/__init__.py", file_of(module)}
    tree = ast.parse(open(os.path.join(ROOT, file_of(module)), encoding="utf-8").read())
    builders = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                and n.module.startswith("tfbench.models.")}
    builders |= {w.spec.builder.split(":")[0] for w in kind.workloads.values() if getattr(w, "spec", None)}
    touched |= {file_of(b) for b in builders}
    if kind.workloads:
        # a scenario of tests/clusters.py runs one of them (its base, conftest's TINY, an image model)
        assert any(mentions("tests/clusters.py", f"--model={n}") or f"--model={n}" in TINY
                   for n in kind.workloads), kind.name
        touched.add("tests/clusters.py")
    assert not unnamed("A workload", touched), unnamed("A workload", touched)
    assert "`KINDS`" in recipe("A workload") and kind in workloads.KINDS


def test_the_walker_sees_a_file_a_recipe_leaves_out():
    assert unnamed("A strategy", {"cluster/plan/spec.py"}) == ["cluster/plan/spec.py"]
    assert not unnamed("A strategy", {"strategies/parameter_server/rounds.py", "strategies/horovod.py"})
    assert unnamed("A workload", {"tfbench/workloads/recommender.py", "tfbench/config/flags.py"}) == [
        "tfbench/config/flags.py"]
