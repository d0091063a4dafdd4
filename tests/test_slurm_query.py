"""Slurm's answers read as delimited fields (cluster/slurm/query.py): values with spaces, '=' and
'|' in them (a job's name or comment, a node's reason) cannot shift the fields tfbench reads, the
way they did when `scontrol -o` output was split on spaces. squeue and sinfo are stand-ins here
printing what Slurm 22.05 prints; tests/test_slurm.py asks a real slurmctld."""
import os

import pytest

from cluster.slurm import batch, job, query
from cluster.slurm import resolver as slurm_resolver

# squeue -h -t all -j 7 -O State:|,NodeList:|,exit_code:|,Reason:|  (exit_code is the wait status)
SQUEUE = "NODE_FAIL|h[0-1]|0|NodeDown|\n"
# sinfo -h -N -n ... -O NodeList:|,NodeAddr:|,StateLong:|,Reason:|
SINFO = ("h0|10.9.0.2|idle|none|\n"
         "h1|10.9.0.3|down*|Not responding x=y | seen by slurmctld [slurm@2026-11-25T09:17:08]|\n")


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """squeue and sinfo on PATH printing the given text and recording their arguments."""
    def install(squeue=SQUEUE, sinfo=SINFO):
        for name, text in (("squeue", squeue), ("sinfo", sinfo)):
            (tmp_path / f"{name}.out").write_text(text)
            script = tmp_path / name
            script.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/{name}.args\ncat {tmp_path}/{name}.out\n')
            script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
        return lambda name: (tmp_path / f"{name}.args").read_text().splitlines()
    return install


def test_parse_keeps_spaces_and_separators_in_the_last_field():
    fields = ("NodeList", "NodeAddr", "StateLong", "Reason")
    rows = query.parse(SINFO + "\n", fields)
    assert rows[0] == {"NodeList": "h0", "NodeAddr": "10.9.0.2", "StateLong": "idle", "Reason": "none"}
    assert rows[1]["Reason"] == "Not responding x=y | seen by slurmctld [slurm@2026-11-25T09:17:08]"
    assert rows[1]["StateLong"] == "down*" and len(rows) == 2
    assert query.parse("COMPLETED     |h0  |\n", ("State", "NodeList", "Reason")) == [
        {"State": "COMPLETED", "NodeList": "h0", "Reason": ""}]  # padded or short lines
    assert query.format_option(("State", "Reason")) == "State:|,Reason:|"


@pytest.mark.parametrize("raw, code", [("0", "0:0"), ("768", "3:0"), ("15", "0:15"), ("9", "0:9"), ("256", "1:0"),
                                       ("2:0", "2:0"), ("", "")])
def test_exit_code_from_the_wait_status(raw, code):
    assert query.exit_code(raw) == code


def test_job_facts_and_description_from_delimited_output(fake_slurm):
    args = fake_slurm()
    assert batch.job_facts("7") == {"state": "NODE_FAIL", "exit_code": "0:0"}
    assert batch.exit_status("7") == 0  # NODE_FAIL keeps 0:0; cluster.slurm.job exits 1 for the state
    text = job.describe("7")
    assert text == ("Slurm job 7 ended NODE_FAIL (NodeDown); node h1 down*: Not responding x=y | seen by "
                    "slurmctld [slurm@2026-11-25T09:17:08]")
    assert args("squeue")[0].split() == ["-h", "-t", "all", "-j", "7", "-O", "State:|,NodeList:|,exit_code:|,Reason:|"]
    assert "-n h[0-1]" in args("sinfo")[0]


def test_a_job_name_or_comment_cannot_pose_as_a_field(fake_slurm):
    """scontrol -o would print `JobName=x JobState=RUNNING ... JobState=FAILED ... Comment=a JobState=RUNNING`;
    the fields chosen here carry neither name nor comment."""
    fake_slurm(squeue="FAILED|h0|768|NonZeroExitCode|\n", sinfo=SINFO.splitlines()[0] + "\n")
    assert batch.job_facts("8") == {"state": "FAILED", "exit_code": "3:0"} and batch.exit_status("8") == 3
    assert job.describe("8") == "Slurm job 8 ended FAILED (NonZeroExitCode)"  # h0 is idle: not named


def test_a_forgotten_job_or_a_silent_slurm(fake_slurm, tmp_path):
    fake_slurm(squeue="", sinfo="")
    assert batch.job_facts("9") == {"state": "unknown", "exit_code": ""} and batch.exit_status("9") == 1
    assert job.describe("9") == "Slurm job 9 ended unknown"
    assert slurm_resolver.node_addresses(["h0"]) == {} and query.nodes([]) == {}


def test_node_addresses_through_sinfo(fake_slurm):
    args = fake_slurm()
    assert slurm_resolver.node_addresses(["h1", "h0", "h1"]) == {"h0": "10.9.0.2", "h1": "10.9.0.3"}
    assert args("sinfo")[0].split() == ["-h", "-N", "-n", "h0,h1", "-O", "NodeList:|,NodeAddr:|,StateLong:|,Reason:|"]
