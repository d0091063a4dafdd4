"""Workloads own their arguments (tfbench.workloads): one registry of what --model names, a kind
of workload is one module and one line of it, and an argument of a kind is one line of its
declaration, from which the flag, its --help group, its default, the run's config, config.json,
results.csv and the refusal for other workloads all follow. RunConfig keeps what every run has."""
import ast
import dataclasses
import os
import re

import pytest

from conftest import ROOT, python_sources
from tfbench import workloads
from tfbench.config import RunConfig, helptext, validate
from tfbench.config.errors import ConfigError
from tools.report import results_csv

ARGS = [(kind, a) for kind in workloads.KINDS for a in kind.arguments.args]


def test_run_config_holds_no_argument_a_workload_reads_alone():
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    owned = {flag for w in workloads.WORKLOADS.values() for flag in w.reads}
    assert not fields & owned, f"RunConfig fields that only some workloads read: {sorted(fields & owned)}"
    assert not fields & {a.name for _, a in ARGS}


def test_every_argument_a_workload_reads_is_declared_by_a_kind():
    declared = {a.name for _, a in ARGS}
    for workload in workloads.WORKLOADS.values():
        assert set(workload.reads) <= declared, (workload.name, set(workload.reads) - declared)


@pytest.mark.parametrize("kind,arg", ARGS, ids=[a.name for _, a in ARGS])
def test_an_argument_is_one_line_of_its_kind(kind, arg):
    """--help under the kind's own group, the config's attribute with its default, config.json,
    results.csv, and refused off its default for a workload of another kind."""
    groups = dict(helptext.tfbench_groups())
    assert arg.name in groups[kind.arguments.title]
    assert sum(arg.name in names for names in groups.values()) == 1
    assert getattr(RunConfig(), arg.name) == arg.default
    assert arg.name in RunConfig().to_dict() and arg.name in results_csv.CONFIG
    assert RunConfig.from_dict(RunConfig().to_dict()) == RunConfig()
    other = next(w for w in workloads.WORKLOADS.values() if arg.name not in w.reads)
    off = {"integer": 7, "float": 0.5, "string": "other", "boolean": not arg.default}[arg.kind]
    with pytest.raises(ConfigError, match=rf"^--{arg.name} applies to {kind.name} workloads"):
        validate(RunConfig(model=other.name, **{arg.name: off}))


def test_a_kind_is_one_module_and_one_line_of_the_registry():
    """Each kind's workloads and arguments are its own module's, and the registry lists its KIND
    on a line of its own; no other module names every kind (flags, validation and --help read the
    registry)."""
    registry = os.path.join(ROOT, "tfbench", "workloads", "__init__.py")
    text = open(registry, encoding="utf-8").read()
    for kind in workloads.KINDS:
        modules = {type(w).__module__ for w in kind.workloads.values()}
        assert len(modules) <= 1, (kind.name, modules)
        module = next(iter(modules), None)
        if module:
            assert re.search(rf"^    {module.rsplit('.', 1)[1]}\.KIND,$", text, re.MULTILINE), kind.name
            assert all(w.kind == kind.name for w in kind.workloads.values())
    kind_modules = {f"tfbench.workloads.{m}" for m in ("images", "recommender", "tokens", "user")}
    naming_all = []
    for rel, path in python_sources():
        if rel == "tfbench/workloads/__init__.py":
            continue
        imported = set()
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        if len(imported & kind_modules) > 2:
            naming_all.append(rel)
    assert not naming_all, f"modules that import the workload kinds one by one (read the registry): {naming_all}"


def test_model_help_and_every_name_come_from_the_registry():
    for name in workloads.WORKLOADS:
        assert workloads.of(name).name == name
    model_help = workloads.model_help()
    for kind in workloads.KINDS:
        assert kind.model_help in model_help
