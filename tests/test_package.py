"""tfbench as a package (pyproject.toml): `pip install .` into a fresh virtualenv gives commands
on the PATH whose --help and a tiny run work from outside the checkout; each command is its
`python -m` module; Horovod's extra pins the version tools/scripts/build_horovod.sh builds.

The fresh virtualenv sees the test environment's installed requirements through a .pth file (so
pip finds them satisfied and installs tfbench alone, in seconds instead of minutes of TensorFlow);
everything of tfbench it runs is the installed copy. The image (tests/test_image.py) installs the
package with its requirements from nothing."""
import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import tomllib

import pytest

from conftest import ROOT, TINY

with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    PROJECT = tomllib.load(f)["project"]


def test_every_command_runs_the_python_m_module_of_its_name():
    from tfbench import commands

    for command, target in PROJECT["scripts"].items():
        module, _, function = target.partition(":")
        assert module == "tfbench.commands"
        runs = getattr(commands, function).__doc__.strip("`").removeprefix("python -m ")
        assert importlib.util.find_spec(runs) is not None, f"{command}: no module {runs}"
        assert command == "tfbench" or command.removeprefix("tfbench-").replace("-", "_") == runs.rpartition(".")[2]


def test_the_horovod_extra_pins_the_version_the_build_script_builds():
    with open(os.path.join(ROOT, "tools", "scripts", "build_horovod.sh"), encoding="utf-8") as f:
        built = re.search(r"^HVD_VERSION=(\S+)", f.read(), re.MULTILINE).group(1)
    assert PROJECT["optional-dependencies"]["horovod"] == [f"horovod=={built}"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh virtualenv with `pip install <checkout>` done; its bin directory."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)],
                   check=True)
    python = str(venv / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "requirements-of-the-test-environment.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([python, "-m", "pip", "install", "--quiet", ROOT], capture_output=True, text=True,
                          timeout=600, cwd=str(venv))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return venv / "bin"


def outside(bin_dir, *argv, timeout=300):
    """A command of the virtualenv, run from a folder outside the checkout, with nothing of it on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(bin_dir.parent))


@pytest.mark.slow
def test_pip_install_puts_commands_on_the_path_that_run_from_the_installed_copy(installed):
    where = outside(installed, "python", "-c", "import tfbench, tools.sweeps, os; print(tfbench.__file__); "
                    "from tfbench.results import tuned; print(os.path.exists(tuned.DEFAULT_STORE))")
    assert where.stdout.split() == [str(installed.parent / "lib" / "python3.11" / "site-packages" / "tfbench" /
                                        "__init__.py"), "True"], where.stderr
    for command in PROJECT["scripts"]:
        helped = outside(installed, command, "--help", timeout=120)
        assert helped.returncode == 0 and "--" in helped.stdout, (command, helped.stdout[-500:], helped.stderr[-500:])


@pytest.mark.slow
def test_the_installed_tfbench_command_runs_a_two_worker_cluster(installed):
    runs = installed.parent / "runs"
    proc = outside(installed, "tfbench", *TINY, "--strategy=multi_worker_mirrored", "--num_workers=2",
                   f"--logdir={runs}", "--run_id=installed")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "cluster images/sec = " in proc.stdout
    assert os.path.exists(runs / "installed" / "results.jsonl")
