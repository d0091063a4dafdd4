"""One place decides the launcher kind (cluster.kinds) and maps each kind to what it does
(cluster.launchers.registry): no other module compares --launcher or --network again."""
import os
import re

import pytest

from cluster import kinds
from cluster.launchers import registry
from conftest import ROOT
from tfbench.config import RunConfig

# `config.launcher == "slurm"`, `c.network != "emulated"`, `kind.name == "local"`, `.launcher in (...)`
BRANCH = re.compile(r"\.(launcher|network)\s*(==|!=|\bin\b|\bnot in\b)|\.name\s*==\s*[\"'](local|emulated|slurm|"
                    r"slurm_nodes|by_hand|kubernetes)[\"']")
# The flags' own rules (which flags combine) are validation, not a launch decision.
ALLOWED = {"cluster/kinds.py", "cluster/launchers/registry.py"}
ALLOWED_DIRS = ("tfbench/config/",)


def sources():
    for package in ("tfbench", "cluster", "strategies", "tools"):
        for root, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    yield os.path.relpath(path, ROOT), path


def test_no_module_branches_on_the_launcher_kind_outside_the_registry():
    found = []
    for rel, path in sources():
        if rel in ALLOWED or rel.startswith(ALLOWED_DIRS):
            continue
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            if BRANCH.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "branches on the launcher kind outside cluster/kinds.py and the registry:\n" + "\n".join(found)


def test_the_checker_sees_a_branch():
    assert BRANCH.search('if config.launcher == "slurm":') and BRANCH.search("emulated = c.network != 'local'")
    assert not BRANCH.search("kind_of(config).emulated_hosts")


@pytest.mark.parametrize("launcher,network,name", [("local", "local", "local"), ("local", "emulated", "emulated"),
                                                   ("slurm", "local", "slurm"), ("slurm", "emulated", "slurm_nodes")])
def test_every_flag_pair_is_one_kind_with_a_behaviour(launcher, network, name):
    config = RunConfig(launcher=launcher, network=network)
    assert kinds.kind_of(config).name == name
    behaviour = registry.behaviour(config)
    assert behaviour.launcher and behaviour.dry_run and behaviour.monitor


def test_every_kind_has_a_behaviour_and_engine():
    assert set(registry.BEHAVIOURS) == set(kinds.KINDS)
    assert {k.engine for k in kinds.KINDS.values()} == {"tfbench", "slurm", "user", "kubernetes"}
    assert [k.name for k in kinds.KINDS.values() if k.restarts_tasks] == ["local", "emulated"]
