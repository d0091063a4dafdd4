"""cluster.supervision.leftovers, behind the suite's own end check (conftest) and make soak, sees what a
leaking run would leave. Other tests may run at once (make test runs the unit tests and the root
tests that time nothing side by side), so each test looks only at what it made itself."""
import os
import shutil
import subprocess

import pytest

from cluster.supervision import leftovers
from conftest import suite_leftovers


def mine(lines, mark: str) -> list:
    """The leftover lines that mention `mark` (what this test made)."""
    return [line for line in lines if mark in line]


def test_a_daemon_left_running_is_seen_and_nothing_once_it_is_gone(tmp_path):
    before = leftovers.snapshot()
    folder = tmp_path / "tfbench-leak"  # as a private Slurm's directory is named
    folder.mkdir()
    shutil.copy("/bin/sleep", folder / "munged")
    daemon = subprocess.Popen([str(folder / "munged"), "30"])
    try:
        (left,) = mine(suite_leftovers(before), str(tmp_path))
        assert left.startswith(f"processes: {daemon.pid} {tmp_path}")
    finally:
        daemon.kill()
        daemon.wait()
    assert mine(suite_leftovers(before), str(tmp_path)) == []


def test_a_sleeping_process_of_someone_else_is_not_a_leftover():
    before = leftovers.snapshot()
    other = subprocess.Popen(["sleep", "30"])
    try:
        assert mine(suite_leftovers(before), f"processes: {other.pid} ") == []
    finally:
        other.kill()
        other.wait()


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_a_namespace_left_behind_is_seen():
    from pyroute2 import netns as pyroute2_netns

    name = "tfb-1eaf00-h0"
    before = leftovers.snapshot()
    pyroute2_netns.create(name)
    try:
        assert mine(suite_leftovers(before), name) == [f"namespaces: {name}"]
    finally:
        pyroute2_netns.remove(name)
    assert mine(suite_leftovers(before), name) == []


def test_a_scratch_directory_goes_when_its_supervisor_is_gone_and_stays_while_it_lives(tmp_path):
    import json

    from cluster.supervision import scratch
    from tfbench.results.rundir import RunDir

    live, dead = RunDir(str(tmp_path / "live")), RunDir(str(tmp_path / "dead"))
    scratch.open_run(live)
    scratch.open_run(dead)
    gone = subprocess.Popen(["true"])
    gone.wait()
    owner = os.path.join(dead.scratch, scratch.OWNER_FILE)
    with open(owner) as f:
        info = json.load(f)
    with open(owner, "w") as f:
        json.dump({**info, "pid": gone.pid}, f)
    try:
        assert dead.scratch in scratch.stale() and live.scratch not in scratch.stale()
        assert dead.scratch in scratch.remove_stale()
        assert not os.path.exists(dead.scratch) and os.path.isdir(live.scratch)
    finally:
        scratch.close_run(live)
        scratch.close_run(dead)
    assert not os.path.exists(live.scratch)


def test_a_reader_finds_an_owner_file_whole_while_it_is_written(tmp_path, monkeypatch):
    """Every run's start removes what dead runs left, reading the other runs' owner files; a file
    read while its run writes it must be whole, or a live run is taken for a dead one and its tasks
    stopped (two runs started at once). Written again over a whole one, a reader finds the old one
    throughout, and no partial file stays."""
    from cluster.net import ownership

    path = str(tmp_path / "run-key.json")
    ownership.write(path, "first")
    seen, dump = [], ownership.json.dump

    def dump_and_look(record, f, **kwargs):
        seen.append(ownership.read(path))
        dump(record, f, **kwargs)
        f.flush()
        seen.append(ownership.read(path))

    monkeypatch.setattr(ownership.json, "dump", dump_and_look)
    ownership.write(path, "second")
    assert [s["run_dir"] for s in seen] == ["first", "first"]
    assert ownership.read(path)["run_dir"] == "second" and ownership.alive(ownership.read(path))
    assert os.listdir(tmp_path) == ["run-key.json"]
