"""The strategy is decided in one place (tfbench.config.strategy_traits): the flag's choices and the
adapter registry derive from its table, every row has its plan, no module outside the table and
the analytic performance model compares a strategy's name again, and no trait names one strategy:
each says what a strategy does (where its variables live, how its tasks meet, who drives the
steps), so that a strategy combining them anew (tables on ps tasks beside Horovod ranks) is a row."""
import ast
import dataclasses
import inspect
import os
import re

import pytest

import strategies
from cluster.launchers import dry_run
from cluster.launchers.local import LocalLauncher
from cluster.plan import topology
from conftest import ROOT, python_sources
from tfbench.config import STRATEGIES, RunConfig, feature_rules, knobs, strategy_traits
from tfbench.config.errors import ConfigError
from tfbench.measure import memory
from tfbench.results.rundir import RunDir

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
    for line in ('if config.traits.launcher_ranks:', 'Traits("horovod", "strategies.horovod:HorovodAdapter")',
                 'with_knobs = any(knobs_cell(p.config) != "default" for p in points)',
                 'for strategy in FLAGS.scaling_strategies:'):
        assert not branches(line), line


def test_choices_adapters_and_knobs_derive_from_the_table():
    assert STRATEGIES == tuple(strategy_traits.TRAITS)
    assert set(knobs.TUNE_GRID) <= set(STRATEGIES)
    for traits in strategy_traits.TRAITS.values():
        assert strategy_traits.well_formed(traits), traits.name
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
    assert strategy_traits.get("ring").knobs == () and not strategy_traits.get("ring").multi_task


@pytest.mark.parametrize("name", strategy_traits.STRATEGIES)
def test_every_strategy_has_a_plan(name):
    traits = strategy_traits.of(name)
    workers = 2 if traits.multi_task else 1
    plan = topology.make_plan(RunConfig(strategy=name, num_workers=workers), cores=(0, 1, 2, 3))
    assert plan.traits is traits
    assert len(plan.tasks) == traits.num_tasks(workers, RunConfig(strategy=name).effective_num_ps)
    assert bool(plan.cluster_spec) == traits.tf_roles
    assert bool(plan.horovod_hosts) == traits.launcher_ranks == bool(plan.ranked_tasks)
    assert sum(t.role == "ps" for t in plan.tasks) == RunConfig(strategy=name).effective_num_ps
    assert all(t.service == (t.role == "ps" or traits.coordinated) for t in plan.tasks if t.role != "chief")


def test_messages_name_the_strategies_that_have_the_trait():
    assert strategy_traits.names(lambda t: t.checkpoints) == ("multi_worker_mirrored", "parameter_server")
    assert strategy_traits.names(lambda t: t.local_devices) == ("mirrored",)


# -- no trait names one strategy ---------------------------------------------------------------

AXES = ("variables", "meet", "driver")  # what a layout trait may be computed from
GONE = ("has_ps", "ranks", "is_ps", "is_horovod", "is_mwms", "is_mirrored")  # read of any object: none
ONE_STRATEGY_READ = re.compile(rf"\.({'|'.join(GONE)})\b")
TRAIT_READ = re.compile(r"\btraits(?:\(\))?\.([a-z_]+)\b|strategy_traits\.(?:get|of)\([^()]*\)\.([a-z_]+)\b")


def _members():
    fields = {f.name for f in dataclasses.fields(strategy_traits.Traits)}
    derived = {name for name, v in vars(strategy_traits.Traits).items()
               if isinstance(v, property) or (inspect.isfunction(v) and not name.startswith("_"))}
    return fields, derived


def _words_of_a_strategy():
    """Words that say which strategy a trait is about: its names, labels and their parts (a task's
    role, such as "ps", says what a task does, and words such as "device" are no strategy's own)."""
    words = set()
    for t in strategy_traits.TRAITS.values():
        words |= {t.name, t.label.lower(), *t.name.split("_"), *t.label.lower().split()}
    return words - {"ps", "worker", "chief", "multi", "single", "device", "server"}


def test_no_module_reads_a_trait_that_means_one_strategy():
    """`.has_ps` (parameter_server) and `.ranks` (horovod), or their like, read anywhere."""
    found = [f"{rel}:{number}: {line.strip()}" for rel, path in python_sources()
             for number, line in enumerate(open(path, encoding="utf-8"), 1) if ONE_STRATEGY_READ.search(line)]
    assert not found, "traits that name one strategy (say what it does instead):\n" + "\n".join(found)


def test_every_trait_read_is_one_the_table_defines():
    fields, derived = _members()
    known = fields | derived
    found = [f"{rel}:{number}: .{name}" for rel, path in python_sources()
             for number, line in enumerate(open(path, encoding="utf-8"), 1)
             for match in TRAIT_READ.finditer(line) for name in match.groups() if name and name not in known]
    assert not found, "reads of traits tfbench.config.strategy_traits does not define:\n" + "\n".join(found)


def test_no_trait_is_named_after_a_strategy():
    fields, derived = _members()
    words = _words_of_a_strategy()
    named = [m for m in fields | derived if m in GONE or set(m.split("_")) & words]
    assert not named, f"traits named after a strategy: {named}"


def test_derived_traits_read_only_the_three_axes():
    """A property computed from the name, label or adapter would be the name under another name."""
    for name, value in vars(strategy_traits.Traits).items():
        if not isinstance(value, property):
            continue
        source = inspect.getsource(value.fget)
        read = set(re.findall(r"self\.([a-z_]+)", source))
        assert read <= set(AXES) | {p for p, v in vars(strategy_traits.Traits).items() if isinstance(v, property)}, \
            (name, read)


def test_the_checkers_see_a_one_strategy_trait():
    assert ONE_STRATEGY_READ.search("if plan.traits.has_ps:") and ONE_STRATEGY_READ.search("if traits.ranks:")
    assert not ONE_STRATEGY_READ.search("if traits.launcher_ranks:")
    assert [m.groups() for m in TRAIT_READ.finditer("a = config.traits.is_horovod or "
                                                    "strategy_traits.get(x).coordinated")] == [
        ("is_horovod", None), (None, "coordinated")]


# -- a strategy that combines the axes anew is one row -----------------------------------------

SPLIT = strategy_traits.Traits(
    "split_probe", "strategies.horovod:HorovodAdapter", "split", variables=strategy_traits.SPLIT_BY_KIND,
    meet=(strategy_traits.LAUNCHER_RANKS, strategy_traits.TF_ROLES), all_reduce=True,
    serves="strategies.parameter_server.server:serve")


@pytest.fixture
def split_row(monkeypatch):
    """Embedding tables on 2 ps tasks, everything else replicated on 3 Horovod ranks that each
    drive their own steps and also hold TF_CONFIG beside the ps: a row the table does not have."""
    monkeypatch.setitem(strategy_traits.TRAITS, SPLIT.name, SPLIT)
    return RunConfig(strategy=SPLIT.name, num_workers=3, num_ps=2, model="dlrm", batch_size=8)


def test_a_row_with_ps_tasks_beside_launcher_ranks_has_its_plan(split_row):
    assert strategy_traits.well_formed(SPLIT)
    plan = topology.make_plan(split_row, cores=(0, 1, 2, 3))
    ranks, others = plan.ranked_tasks, [t for t in plan.tasks if t.horovod_rank < 0]
    assert [t.name for t in ranks] == ["worker_0", "worker_1", "worker_2"] and not any(t.service for t in ranks)
    assert [t.name for t in others] == ["ps_0", "ps_1"] and all(t.service and not t.measures for t in others)
    assert len(plan.tasks) == SPLIT.num_tasks(3, split_row.effective_num_ps) == 5
    assert plan.horovod_hosts == "localhost:3"
    assert set(plan.cluster_spec) == {"ps", "worker"}  # the ranks hold TF_CONFIG to reach the ps
    assert all(t.tf_config["task"] == {"type": t.role, "index": t.index} for t in plan.tasks)
    assert feature_rules.task_names(split_row, SPLIT) == ["worker_0", "worker_1", "worker_2", "ps_0", "ps_1"]


def test_a_row_with_ps_tasks_beside_launcher_ranks_launches_and_dry_runs(split_row, tmp_path):
    plan = topology.make_plan(split_row, cores=(0, 1, 2, 3))
    run = RunDir(str(tmp_path / "run"))
    units = LocalLauncher(run, split_row).units(plan)
    assert [u.name for u in units] == ["ps_0", "ps_1", "horovodrun"]
    assert "-np" in units[-1].command and units[-1].command[units[-1].command.index("-np") + 1] == "3"
    lines = "\n".join(dry_run.local_lines(split_row, plan, run))
    assert lines.count("started by horovodrun below") == 3 and lines.count("--task ps_") == 2


def test_a_row_with_tables_on_ps_keeps_them_off_the_workers_memory(split_row):
    figures = split_row.workload.memory_bound(split_row)  # the recommender's own, counted without TensorFlow
    tables = split_row.workload.replicated_bytes(split_row)
    assert 0 < tables < 4 * figures["params"]
    worker, ps = (memory.task_bytes(role, split_row, figures, 8) for role in ("worker", "ps"))
    replicated = memory.task_bytes("worker", split_row.replace(strategy="horovod", num_ps=0), figures, 8)
    everything_on_ps = memory.task_bytes("ps", split_row.replace(strategy="parameter_server"), figures, 8)
    assert replicated - worker == tables  # a rank holds the rows a step touches, not the tables
    assert ps < everything_on_ps  # the dense layers stay on the ranks
