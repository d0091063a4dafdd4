"""One place decides the launcher kind (tfbench.config.kinds) and maps each kind to what it does
(cluster.launchers.registry): no other module compares --launcher or --network again, validation
included (each kind carries the flags it takes)."""
import re

import pytest

from cluster.launchers import registry
from conftest import python_sources
from tfbench.config import RunConfig, kinds

KIND_NAMES = "local|emulated|slurm|slurm_nodes|by_hand|kubernetes"
# `config.launcher == "slurm"`, `c.network != "emulated"`, `.get("network") == ...`, `kind.name == "local"`,
# `entry == "slurm"`, `.launcher in (...)`
BRANCH = re.compile(r"\.(launcher|network)\s*(==|!=|\bin\b|\bnot in\b)"
                    r"|get\([\"'](launcher|network)[\"'][^)]*\)\s*(==|!=|\bin\b|\bnot in\b)"
                    rf"|(==|!=)\s*[\"']({KIND_NAMES})[\"']|\bin\s*[\(\[\{{]\s*[\"']({KIND_NAMES})[\"']")
ALLOWED = {
    "tfbench/config/kinds.py",  # the one reader of --launcher with --network
    "cluster/launchers/registry.py",  # each kind -> what it does
    # the analytic model reads a run's config.json without importing tfbench (docs/architecture.md)
    "tfbench/perfmodel/fitting/observations.py",
}


def test_no_module_branches_on_the_launcher_kind_outside_the_registry():
    found = []
    for rel, path in python_sources():
        if rel in ALLOWED:
            continue
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            if BRANCH.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, ("branches on the launcher kind outside tfbench/config/kinds.py and the registry:\n"
                       + "\n".join(found))


def test_the_checker_sees_a_branch():
    for line in ('if config.launcher == "slurm":', "emulated = c.network != 'local'", 'if entry == "slurm" and x:',
                 'if values.get("launcher", "local") == "slurm":', 'if kind.name == "by_hand":',
                 'ok = name in ("local", "emulated")'):
        assert BRANCH.search(line), line
    assert not BRANCH.search("kind_of(config).emulated_hosts")
    assert not BRANCH.search('RunConfig(launcher="slurm", network="emulated")')


@pytest.mark.parametrize("launcher,network,name", [("local", "local", "local"), ("local", "emulated", "emulated"),
                                                   ("slurm", "local", "slurm"), ("slurm", "emulated", "slurm_nodes")])
def test_every_flag_pair_is_one_kind_with_a_behaviour(launcher, network, name):
    config = RunConfig(launcher=launcher, network=network)
    assert kinds.kind_of(config).name == name
    assert kinds.kind_of(config.to_dict()).name == name  # a run's config.json, as reports read it
    behaviour = registry.behaviour(config)
    assert behaviour.launcher and behaviour.dry_run and behaviour.monitor


def test_every_kind_has_a_behaviour_and_engine():
    assert set(registry.BEHAVIOURS) == set(kinds.KINDS)
    assert {k.engine for k in kinds.KINDS.values()} == {"tfbench", "slurm", "user", "kubernetes"}
    assert [k.name for k in kinds.KINDS.values() if k.restarts_tasks] == ["local", "emulated"]


def test_each_kind_refuses_the_flags_it_does_not_take_in_one_line():
    """The kind carries its flag rules: what it takes is accepted, the rest refused with a reason."""
    for kind in kinds.KINDS.values():
        for flag in kinds.LAUNCH_FLAGS:
            refusal = kind.refusal(flag)
            assert (refusal == "") == (flag in kind.accepts), (kind.name, flag)
            assert not refusal or (refusal.startswith(f"--{flag} ") and "\n" not in refusal)
    assert kinds.KINDS["emulated"].refusal("link_bandwidth") == ""
    assert "network namespaces" in kinds.KINDS["emulated"].refusal("hosts")
    assert "Slurm picks the nodes" in kinds.KINDS["slurm"].refusal("hosts")
    assert "by hand" in kinds.KINDS["by_hand"].refusal("horovod_elastic")
