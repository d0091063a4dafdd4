"""The strategy is decided in one place (tfbench.config.strategy_traits): the flag's choices and the
adapter registry derive from its table, every layout of processes has its plan builder, and no
module outside the table and the analytic performance model compares a strategy's name again."""
import ast
import os
import re

import pytest

import strategies
from cluster.plan import topology
from conftest import ROOT, python_sources
from tfbench.config import STRATEGIES, RunConfig, knobs, strategy_traits
from tfbench.config.errors import ConfigError

NAMES = "|".join(strategy_traits.STRATEGIES)
# `config.strategy == "horovod"`, `strategy in (...)`, `x != "parameter_server"`, `.get("strategy") == ...`
COMPARISON = re.compile(rf"(?<!for )strategy[\"']?\)?\s*(==|!=|\bin\b|\bnot in\b)\s"
                        rf"|(==|!=)\s*[\"']({NAMES})[\"']|\bin\s*[\(\[\{{]\s*[\"']({NAMES})[\"']")
ALLOWED = ("tfbench/config/strategy_traits.py",  # the table
           "tfbench/perfmodel/",  # the analytic model's own strategies (ring, tree, parameter_server)
           "tools/model/")  # its command line, which models them
# "default" is also a knob label ('default' knobs): a literal "default" counts only beside the word strategy
NOT_A_STRATEGY = re.compile(r"(==|!=)\s*[\"']default[\"']")


def branches(line: str) -> bool:
    if not COMPARISON.search(line):
        return False
    return ("strategy" in line or not NOT_A_STRATEGY.search(line)
            or bool(COMPARISON.search(NOT_A_STRATEGY.sub("", line))))


def test_no_module_compares_a_strategy_name_outside_the_table():
    found = [f"{rel}:{number}: {line.strip()}"
             for rel, path in python_sources() if not rel.startswith(ALLOWED)
             for number, line in enumerate(open(path, encoding="utf-8"), 1) if branches(line)]
    assert not found, "strategy names compared outside tfbench/config/strategy_traits.py:\n" + "\n".join(found)


def test_the_checker_sees_a_comparison():
    for line in ('if config.strategy == "horovod":', "if plan.strategy != 'parameter_server':",
                 'local = x if config.strategy in ("default", "mirrored") else 1', 'if name == "horovod":',
                 'if values["strategy"] == "mirrored":', 'if p.config.get("strategy") == "mirrored":',
                 'ok = strategy in STRATEGIES'):
        assert branches(line), line
    for line in ('if config.traits.ranks:', 'Traits("horovod", "strategies.horovod:HorovodAdapter")',
                 'with_knobs = any(knobs_cell(p.config) != "default" for p in points)',
                 'for strategy in FLAGS.scaling_strategies:'):
        assert not branches(line), line


def test_choices_adapters_and_knobs_derive_from_the_table():
    assert STRATEGIES == tuple(strategy_traits.TRAITS)
    assert set(knobs.TUNE_GRID) <= set(STRATEGIES)
    for traits in strategy_traits.TRAITS.values():
        assert traits.processes in strategy_traits.PROCESSES
        assert set(traits.tune_grid) <= {k.name for k in traits.knobs}, traits.name
        for knob in traits.knobs:
            assert hasattr(RunConfig(), knob.name), f"{traits.name}'s knob {knob.name} is no RunConfig field"


@pytest.mark.parametrize("name", strategy_traits.STRATEGIES)
def test_every_adapter_the_table_names_exists(name):
    """Read with ast (no TensorFlow): a misspelt adapter would otherwise fail inside a task, after launch."""
    module, cls = strategy_traits.of(name).adapter.split(":")
    path = os.path.join(ROOT, *module.split(".")) + ".py"
    assert os.path.exists(path), path
    classes = {n.name for n in ast.walk(ast.parse(open(path, encoding="utf-8").read())) if isinstance(n, ast.ClassDef)}
    assert cls in classes, f"{module} has no class {cls}"
    assert module.startswith("strategies.")


def test_unknown_strategy_is_one_line():
    with pytest.raises(ConfigError, match="--strategy='ring' is unknown; choose one of default, mirrored"):
        strategy_traits.of("ring")
    with pytest.raises(ConfigError, match="is unknown"):
        strategies.adapter_class("ring")
    assert strategy_traits.get("ring").knobs == () and not strategy_traits.get("ring").has_ps


@pytest.mark.parametrize("name", strategy_traits.STRATEGIES)
def test_every_strategy_has_a_plan(name):
    traits = strategy_traits.of(name)
    workers = 2 if traits.multi_task else 1
    plan = topology.make_plan(RunConfig(strategy=name, num_workers=workers), cores=(0, 1, 2, 3))
    assert plan.traits is traits
    assert len(plan.tasks) == traits.num_tasks(workers, RunConfig(strategy=name).effective_num_ps)
    assert bool(plan.cluster_spec) == (traits.processes in (strategy_traits.PEERS, strategy_traits.COORDINATOR))
    assert bool(plan.horovod_hosts) == traits.ranks


def test_messages_name_the_strategies_that_have_the_trait():
    assert strategy_traits.names(lambda t: t.checkpoints) == ("multi_worker_mirrored", "parameter_server")
    assert strategy_traits.names(lambda t: t.local_devices) == ("mirrored",)
