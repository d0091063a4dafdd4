"""Launch validation: other machines in --hosts are refused by the local launcher before anything
starts, with one line pointing to Slurm and the manual path; Slurm flags are checked alike."""
import socket

import pytest

from conftest import run_cli
from tfbench.config import RunConfig, validate
from tfbench.config.errors import ConfigError
from tfbench.config.kinds import KINDS


def check(tmp_path, **kw):
    return validate(RunConfig(logdir=str(tmp_path / "runs"), **kw))


def test_this_machine_names_are_accepted(tmp_path):
    for hosts in (("localhost",), ("127.0.0.1",), (socket.gethostname(),), ("localhost", "127.0.0.2")):
        assert check(tmp_path, strategy="multi_worker_mirrored", num_workers=2, hosts=hosts).hosts == hosts


BAD = [
    (dict(strategy="multi_worker_mirrored", num_workers=2, hosts=("nodeA", "nodeB")),
     "--hosts names other machines (nodeA,nodeB)"),
    (dict(hosts=("localhost", "nodeB")), "use --launcher=slurm"),
    (dict(launcher="pbs"), "--launcher='pbs' is unknown"),
    (dict(slurm_partition="debug"), "--slurm_partition applies to --launcher=slurm only"),
    (dict(slurm_nodes=2), "--slurm_nodes applies to --launcher=slurm only"),
    (dict(launcher="slurm", hosts=("nodeA",)), "Slurm picks the nodes"),
    (dict(launcher="slurm", slurm_time="ten minutes"), "is not a Slurm time"),
    (dict(launcher="slurm", slurm_nodes=-1), "--slurm_nodes must be 0 (a node per worker"),
    (dict(launcher="slurm", network="emulated", strategy="multi_worker_mirrored", num_workers=11, slurm_nodes=0),
     "runs at most 10 nodes (the run asks for 11)"),
    (dict(launcher="slurm", slurm_account="a b"), "--slurm_account='a b' must be"),
    (dict(launcher="slurm", strategy="multi_worker_mirrored", num_workers=2, slurm_nodes=3),
     "--slurm_nodes=3 is more nodes than the run's 2 tasks"),
    (dict(launcher="slurm", strategy="horovod", num_workers=3, slurm_nodes=2), "must be a multiple of --slurm_nodes=2"),
]


@pytest.mark.parametrize("kw,expected", BAD, ids=[e for _, e in BAD])
def test_bad_launch_is_one_line(tmp_path, kw, expected):
    with pytest.raises(ConfigError) as e:
        check(tmp_path, **kw)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_slurm_times_and_flags_accepted(tmp_path):
    for t in ("10", "10:00", "01:10:00", "1-00", "2-12:30:00"):
        assert check(tmp_path, launcher="slurm", slurm_time=t, slurm_partition="debug", slurm_nodes=2,
                     strategy="multi_worker_mirrored", num_workers=2).slurm_time == t


def test_manual_path_accepts_other_machines(tmp_path):
    config = RunConfig(logdir=str(tmp_path), strategy="multi_worker_mirrored", num_workers=2, hosts=("nodeA", "nodeB"))
    assert validate(config, kind=KINDS["by_hand"]) is config


def test_cli_refuses_other_hosts_before_anything_starts(tmp_path):
    logdir = tmp_path / "runs"
    result = run_cli(f"--logdir={logdir}", "--strategy=multi_worker_mirrored", "--num_workers=2",
                     "--hosts=nodeA,nodeB", timeout=60)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--launcher=slurm" in lines[0] and "cluster.by_hand" in lines[0], result.stderr
    assert not logdir.exists()


def test_emulated_slurm_nodes_and_faults_are_accepted(tmp_path):
    config = check(tmp_path, launcher="slurm", network="emulated", link_bandwidth="100mbit", slurm_nodes=0,
                   strategy="parameter_server", ps_placement="separate", num_workers=2, fault="worker_1:kill@2")
    assert config.effective_slurm_nodes == 4  # a node per worker, the ps and the coordinator
    with pytest.raises(ConfigError, match="only on emulated nodes"):
        check(tmp_path, launcher="slurm", strategy="multi_worker_mirrored", num_workers=2, fault="worker_1:kill@2")
