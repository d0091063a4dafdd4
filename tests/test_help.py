"""First contact: every entry point's --help lists its own flags (grouped, with defaults) and
none of absl's internals; --dry_run plans and prints without starting or writing anything;
README's flag reference is the one generated from the flag definitions."""
import os
import re
import subprocess
import sys

import psutil
import pytest

from conftest import ROOT, run_cli
from tfbench.config import RunConfig

ABSL_INTERNALS = ("--pdb", "--run_with_pdb", "--verbosity", "--logtostderr", "--only_check_args")
ENTRY_POINTS = {
    "tfbench": ["--model", "--strategy", "--num_workers", "--dry_run", "What runs:", "Distribution:"],
    "cluster.by_hand": ["--model", "--strategy", "--format", "--run_dir", "Plan output:"],
    "cluster.k8s": ["--model", "--out_dir", "--image", "--pvc", "--workdir", "--namespace", "Manifests:"],
    "cluster.merge": ["--run_dir"],
    "tools.sweep": ["--config", "--sweep_dir", "--repeats", "--set", "--strategy", "Axes"],
    "tools.report": ["--out", "Report:"],
    "tools.bench.soak": ["--runs", "--dir", "Soak:"],
    "tools.report.tb_export": ["--out", "Export:"],
    "tools.bench.overhead": ["--against", "--repeats", "Benchmark:"],
    "tools.data": ["--data_dir", "--num_examples", "--image_size", "--num_shards", "Data set:"],
}


# Every command a user runs; --helpfull must answer like --help, with exit code 0.
USER_ENTRY_POINTS = ("tfbench", "tfbench.usage", "cluster.by_hand", "cluster.k8s", "cluster.merge", "cluster.net.netns",
                     "tools.sweep", "tools.report", "tools.report.tb_export", "tools.report.latency", "tools.model",
                     "tools.bench", "tools.bench.overhead", "tools.bench.peak", "tools.bench.minimal_loop",
                     "tools.bench.minimal_ps_loop", "tools.bench.ps_peer",
                     "tools.bench.soak", "tools.bench.delay_line_ceiling", "tools.data")


def test_every_run_config_setting_is_a_declared_flag():
    from tfbench.config import flags as tfbench_flags

    declared = [name for _, entries in tfbench_flags.GROUPS for _, name, _ in entries]
    assert sorted(declared) == sorted(RunConfig.names())


@pytest.mark.parametrize("module", sorted(ENTRY_POINTS))
def test_help_lists_own_flags_and_no_absl_internals(module):
    result = run_cli("--help", module=module, timeout=120)
    assert result.returncode == 0, result.stderr
    for expected in ENTRY_POINTS[module]:
        assert expected in result.stdout, f"{module} --help lacks {expected}"
    for internal in ABSL_INTERNALS:
        assert internal not in result.stdout, f"{module} --help shows absl's {internal}"


def test_tfbench_help_lists_every_run_config_flag_with_its_default():
    out = run_cli("--help", timeout=120).stdout
    defaults = RunConfig()
    for name in RunConfig.names():
        match = re.search(rf"^  --{name}=(\S*)", out, re.MULTILINE)
        assert match, f"--{name} missing from --help"
        value = getattr(defaults, name)
        if isinstance(value, bool):
            assert match.group(1) == str(value).lower()
        elif isinstance(value, (int, float, str)) and value != "":
            assert match.group(1) == str(value)


@pytest.mark.parametrize("module,own", [("cluster.by_hand", ["run_dir", "format"]),
                                        ("cluster.k8s", ["out_dir", "image", "pvc", "workdir", "namespace"])])
def test_plan_and_k8s_help_list_their_own_flags(module, own):
    """A flag line each (`  --name=default`), not only a mention in the description."""
    out = run_cli("--help", module=module, timeout=120).stdout
    for name in own:
        assert re.search(rf"^  --{name}=", out, re.MULTILINE), f"{module} --help lacks --{name}"


@pytest.mark.parametrize("module", USER_ENTRY_POINTS)
def test_helpfull_exits_0_everywhere(module):
    result = run_cli("--helpfull", module=module, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() and "Traceback" not in result.stderr


def test_merge_help_says_its_whole_first_paragraph():
    from cluster import merge

    out = run_cli("--help", module="cluster.merge", timeout=60).stdout
    first = " ".join(merge.__doc__.strip().split("\n\n")[0].split())
    assert first.endswith("or as Slurm steps).") and first in " ".join(out.split())


def test_short_help_aliases_and_helpfull_keeps_absl_flags():
    short = run_cli("-h", timeout=120)
    assert short.returncode == 0 and "--batch_size" in short.stdout
    full = run_cli("--helpfull", timeout=120)
    assert "--verbosity" in full.stdout and "--batch_size" in full.stdout


def test_dry_run_prints_every_task_and_writes_nothing(tmp_path):
    logdir = tmp_path / "runs"
    result = run_cli(f"--logdir={logdir}", "--dry_run", "--strategy=parameter_server", "--num_workers=2",
                     "--run_id=planned", timeout=120)
    assert result.returncode == 0, result.stderr
    for task in ("chief_0", "worker_0", "worker_1", "ps_0"):
        line = next(l for l in result.stdout.splitlines() if l.startswith(f"{task}:"))
        assert "host=localhost" in line and "cores=" in line and "port=" in line and "threads=" in line
    assert result.stdout.count("TF_CONFIG=") == 4
    assert result.stdout.count("-m tfbench.task") == 4
    assert not logdir.exists()


def test_dry_run_starts_no_process(tmp_path):
    """The CLI process is watched with psutil while it runs: no child ever appears."""
    proc = subprocess.Popen([sys.executable, "-m", "tfbench", f"--logdir={tmp_path / 'runs'}", "--dry_run",
                             "--strategy=multi_worker_mirrored", "--num_workers=2"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(proc.pid)
    children = set()
    while proc.poll() is None:
        try:
            children.update(c.pid for c in watched.children(recursive=True))
        except psutil.NoSuchProcess:
            break
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert "worker_1:" in out
    assert not children, f"--dry_run started processes {children}"
    assert not (tmp_path / "runs").exists()


def test_readme_flag_reference_is_generated_from_the_definitions():
    generated = subprocess.run([sys.executable, "-m", "tfbench.usage", "--markdown"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    block = re.search(r"<!-- flags:begin.*?-->\n(.*?)<!-- flags:end -->", readme, re.DOTALL)
    assert block, "README.md has no generated flag reference"
    assert block.group(1) == generated, ("README's flag reference is out of date: regenerate it with "
                                         "`python -m tfbench.usage --markdown`")
