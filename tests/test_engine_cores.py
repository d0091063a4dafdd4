"""Cores of Slurm and Kubernetes runs are the nodes', never the submitting machine's: a request
larger than this machine is accepted for them, checked against sinfo when Slurm answers, and
trusted (with a note in the plan) when it does not."""
import os
import stat

import pytest
import yaml

from cluster.slurm import nodes, steps
from conftest import run_cli
from tfbench.config import ConfigError, RunConfig, validate
from tfbench.config.kinds import KINDS

MORE = 4 * os.cpu_count()  # more cores than this machine has


def fake_slurm(tmp_path, sinfo_output=None):
    """sbatch, squeue, scancel, srun that do nothing and an sinfo that prints `sinfo_output`
    (None: fails as sinfo does without a Slurm configuration); returns the PATH to use."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("sbatch", "squeue", "scancel", "srun"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    sinfo = ("#!/bin/sh\necho 'sinfo: fatal: Could not establish a configuration source' >&2\nexit 1\n"
             if sinfo_output is None else f"#!/bin/sh\nprintf '{sinfo_output}'\n")
    (bin_dir / "sinfo").write_text(sinfo)
    for path in bin_dir.iterdir():
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def test_slurm_and_engine_cores_are_not_this_machines(tmp_path):
    slurm = RunConfig(launcher="slurm", strategy="multi_worker_mirrored", num_workers=4, slurm_nodes=2,
                      cores_per_worker=MORE, logdir=str(tmp_path))
    assert validate(slurm) is slurm
    k8s = RunConfig(strategy="parameter_server", num_workers=2, cores_per_worker=MORE, logdir=str(tmp_path))
    assert validate(k8s, kind=KINDS["kubernetes"]) is k8s
    with pytest.raises(ConfigError, match="this machine's"):
        validate(k8s)  # a local run still takes this machine's cores
    with pytest.raises(ConfigError, match="0 \\(auto\\) or more"):
        validate(RunConfig(launcher="slurm", cores_per_worker=-1, logdir=str(tmp_path)))


def test_sinfo_decides_when_it_answers(tmp_path, monkeypatch):
    config = RunConfig(launcher="slurm", strategy="multi_worker_mirrored", num_workers=4, slurm_nodes=2,
                       cores_per_worker=8, slurm_partition="batch")
    plan = steps.plan_for(config)
    monkeypatch.setenv("PATH", fake_slurm(tmp_path, "4\\n16\\n"))
    assert nodes.largest_node_cpus("batch") == (16, "")
    assert nodes.check_cores(config, plan).endswith("the largest node of partition batch has 16 (sinfo)")
    with pytest.raises(ConfigError, match=r"needs 32 CPUs per node \(2 task\(s\) x 16\) and the largest node of "
                                          r"partition batch has 16 \(sinfo\)"):
        nodes.check_cores(config.replace(cores_per_worker=16), plan)
    monkeypatch.setenv("PATH", fake_slurm(tmp_path))
    note = nodes.check_cores(config, plan)
    assert "not checked here (sinfo failed: sinfo: fatal: Could not establish" in note
    assert "Slurm refuses the job if no node has them" in note


def test_k8s_takes_the_nodes_cores(tmp_path):
    result = run_cli("--strategy=parameter_server", "--num_workers=2", f"--cores_per_worker={MORE}",
                     "--image=registry.example/tfbench:1", "--pvc=tfbench-runs", f"--out_dir={tmp_path / 'k8s'}",
                     module="cluster.k8s", timeout=120)
    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all((tmp_path / "k8s" / "tfjob.yaml").read_text()))
    worker = documents[1]["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["cpu"] == str(MORE)
