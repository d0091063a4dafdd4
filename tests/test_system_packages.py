"""The Debian packages of the root tests: make test installs them before any test runs
(tools/scripts/install_test_packages.sh), the install scripts wait for apt's own locks
(tools/scripts/debian_packages.sh), a test that cannot have them says why once
(tests/system_packages.py), and the root tests of one module run on one pytest-xdist worker
(tests/xdist_groups.py)."""
import fcntl
import os
import re
import subprocess
import sys
import time

import pytest
import system_packages

from conftest import ROOT

PACKAGES_SH = os.path.join(ROOT, "tools", "scripts", "debian_packages.sh")


def test_make_test_installs_the_packages_before_the_first_test():
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    install = next(i for i, line in enumerate(lines) if "install_test_packages.sh" in line)
    first_test = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    assert install < first_test
    with open(os.path.join(ROOT, "tools", "scripts", "install_test_packages.sh")) as f:
        scripts = set(re.findall(r"install_\w+\.sh", f.read())) - {"install_test_packages.sh"}
    assert scripts == {"install_slurm.sh", "install_podman.sh"}  # every package set a test installs


def test_a_missing_package_set_fails_the_first_test_once_and_skips_the_others(request):
    asked = []

    def reason():
        asked.append(1)
        return "apt-get could not install it"

    with pytest.raises(pytest.fail.Exception, match="a test set: apt-get could not install it"):
        system_packages.require(request, "a test set", reason, fail=True)
    with pytest.raises(pytest.skip.Exception, match=f"said once, by {re.escape(request.node.nodeid)}"):
        system_packages.require(request, "a test set", reason, fail=True)
    assert asked == [1]  # the install is tried once per process


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="apt-get update needs root")
def test_apt_get_waits_while_another_process_holds_apts_lock(tmp_path):
    """apt-get's own DPkg::Lock::Timeout does not cover the package lists' lock (apt 2.6): held
    here on a private lists directory, the install scripts' apt_get waits for it, then runs."""
    lists, parts = tmp_path / "lists", tmp_path / "sources.list.d"
    (lists / "partial").mkdir(parents=True)
    parts.mkdir()
    (tmp_path / "sources.list").write_text("")
    lock = os.open(lists / "lock", os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.lockf(lock, fcntl.LOCK_EX)
    update = (f"source {PACKAGES_SH}; apt_get -o Dir::State::Lists={lists} -o Dir::Etc::sourcelist={tmp_path}/"
              f"sources.list -o Dir::Etc::sourceparts={parts} update")
    proc = subprocess.Popen(["bash", "-c", update], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        assert proc.poll() is None, proc.communicate()  # still waiting: it has not failed on the lock
    finally:
        fcntl.lockf(lock, fcntl.LOCK_UN)
        os.close(lock)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Could not get lock" not in out + err


GROUPED = """
import os, time
import pytest

@pytest.mark.root
@pytest.mark.parametrize("i", range(4))
def test_root(i):
    time.sleep(0.2)
    assert os.environ["PYTEST_XDIST_WORKER"].startswith("gw")

@pytest.mark.parametrize("i", range(4))
def test_other(i):
    time.sleep(0.2)
    assert os.environ["PYTEST_XDIST_WORKER"].startswith("gw")
"""


def test_the_root_tests_of_one_module_run_on_one_xdist_worker(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    root: needs root\n")
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(ROOT, "tests"),
                                                                      os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "xdist_groups",
                           "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ran = re.findall(r"\[(gw\d)\].*PASSED \S*::(test_\w+)\[\d\](@\w+)?", proc.stdout)
    assert len(ran) == 8, proc.stdout
    root = {(worker, group) for worker, name, group in ran if name == "test_root"}
    assert len(root) == 1 and root.pop()[1] == "@test_grouped"  # one worker, under the module's group
    assert all(not group for _, name, group in ran if name == "test_other")
