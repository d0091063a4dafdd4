"""--dry_run prints what the chosen launcher would really do: the sbatch script and srun lines
on Slurm, the namespaces, addresses, shaping and wrapped commands of emulated hosts, the
private namespace of local runs; never a horovodrun line a launcher does not run."""
import os

import pytest

from cluster.launchers import registry
from cluster.plan.topology import make_plan
from cluster.slurm.nodes import checked_plan
from conftest import run_cli
from tfbench.config import RunConfig
from tfbench.results.rundir import RunDir

MORE = 4 * os.cpu_count()


def render(tmp_path, plan=None, **kw):
    config = RunConfig(logdir=str(tmp_path), run_id="planned", **kw)
    run = RunDir(str(tmp_path / "planned"))
    return registry.dry_run(config, plan or make_plan(config, cores=(0, 1)), run)


@pytest.fixture
def outside_slurm(monkeypatch, tmp_path):
    from test_engine_cores import fake_slurm

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("PATH", fake_slurm(tmp_path))


def test_slurm_prints_the_sbatch_script_and_the_tasks_it_runs(tmp_path, outside_slurm):
    config = dict(launcher="slurm", strategy="parameter_server", num_workers=2, num_ps=1, slurm_nodes=2,
                  cores_per_worker=8)
    plan = checked_plan(RunConfig(**config))
    out = render(tmp_path, plan, **config)
    script = out.split(f"----- {tmp_path}/planned/slurm.sbatch -----\n", 1)[1].split("\n-----", 1)[0]
    assert script.startswith("#!/bin/bash\n") and "#SBATCH --ntasks-per-node=3\n" in script
    assert "srun --ntasks=4 --nodes=2 --distribution=arbitrary" in script  # chief, ps, worker_0 | worker_1
    assert "#SBATCH --cpus-per-task=8\n" in script and "#SBATCH --nodes=2\n" in script
    assert f"-m tfbench.task --run_dir {tmp_path}/planned --task slurm\n" in script
    assert "--task chief_0" not in out and "slurm-node" not in out and "not pinned" not in out
    assert [line.split(",")[0] for line in out.splitlines() if "Slurm rank" in line] == [
        "chief_0: Slurm rank 0", "ps_0: Slurm rank 1", "worker_0: Slurm rank 2", "worker_1: Slurm rank 3"]
    assert "note: cores: 8 CPU(s) per Slurm task" in out


def test_slurm_inside_an_allocation_prints_the_srun_step(tmp_path, outside_slurm, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    out = render(tmp_path, launcher="slurm", strategy="multi_worker_mirrored", num_workers=2)
    assert "inside Slurm job 42" in out and "slurm.sbatch" not in out
    (step,) = [line for line in out.splitlines() if line.startswith("  srun ")]
    assert step.endswith(f"--run_dir {tmp_path}/planned --task slurm") and "--ntasks=2" in step


def test_horovod_on_slurm_and_emulated_hosts_shows_no_horovodrun(tmp_path, outside_slurm):
    pytest.importorskip("horovod")
    config = dict(launcher="slurm", strategy="horovod", num_workers=4, slurm_nodes=2)
    out = render(tmp_path, checked_plan(RunConfig(**config)), **config)
    assert "horovodrun -" not in out and "--ntasks-per-node=2" in out
    assert "worker_3: Slurm rank 3 = Horovod rank 3, task 1 of node 1" in out
    emulated = render(tmp_path, network="emulated", link_bandwidth="100mbit", strategy="horovod", num_workers=2)
    assert "horovodrun -" not in emulated and "no horovodrun" in emulated
    assert "HOROVOD_RANK=1 HOROVOD_SIZE=2 HOROVOD_HOSTNAME=10.X.Y.3 HOROVOD_GLOO_RENDEZVOUS_ADDR=10.X.Y.1" in emulated


def test_emulated_hosts_show_namespaces_addresses_shaping_and_wrapped_commands(tmp_path):
    out = render(tmp_path, network="emulated", link_bandwidth="100mbit", strategy="parameter_server",
                 ps_placement="separate", num_workers=2)
    assert "host h2: namespace tfb-KEY-h2, eth0 10.X.Y.4, joined to port h2 of br0" in out
    assert ("every host link shaped to 100 Mbit/s each way (100mbit) with tbf on the host's eth0 and its switch "
            "port: rate 12500000 bytes/s, burst 50000 bytes, queue limit 675000 bytes") in out
    assert (f"command: {os.sys.executable} -m cluster.net.netns_exec tfb-KEY-h2 --hostname 10.X.Y.4 -- "
            f"{os.sys.executable} -m tfbench.task --run_dir {tmp_path}/planned --task ps_0") in out
    assert '"ps": ["10.X.Y.4:' in out  # TF_CONFIG names the hosts' addresses
    assert "unshaped veth" in render(tmp_path, network="emulated", strategy="multi_worker_mirrored", num_workers=2)


def test_slurm_on_emulated_nodes_shows_the_private_cluster_and_asks_no_sinfo(tmp_path, monkeypatch):
    from test_engine_cores import fake_slurm

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("PATH", fake_slurm(tmp_path, "1\\n"))  # an sinfo that would refuse 2 CPUs per node
    config = dict(launcher="slurm", network="emulated", link_bandwidth="100mbit", slurm_nodes=3,
                  strategy="parameter_server", ps_placement="separate", num_workers=2)
    plan = checked_plan(RunConfig(**config))
    out = render(tmp_path, plan, **config)
    assert f"each emulated node claims CPUs=2, all of them sharing this machine's {os.cpu_count()} cores" in out
    assert "first a private Slurm of 3 emulated node(s)" in out and "10.X.Y.254" in out
    assert "node h1: slurmd -N h1 in namespace tfb-KEY-h1 (hostname h1), eth0 10.X.Y.3, claims CPUs=2; tasks: ps_0" in out
    assert "node h2: slurmd -N h2 in namespace tfb-KEY-h2 (hostname h2), eth0 10.X.Y.4, claims CPUs=2; tasks: " \
           "worker_0, worker_1" in out
    assert "links: every host link shaped to 100 Mbit/s each way" in out
    assert "#SBATCH --nodes=3\n" in out and "#SBATCH --ntasks-per-node=2\n" in out


def test_local_multi_task_runs_show_their_private_namespace(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    out = render(tmp_path, strategy="multi_worker_mirrored", num_workers=2)
    assert out.count(f"-m cluster.net.netns_exec tfb-KEY-local -- {os.sys.executable} -m tfbench.task") == 2
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "not root, so no private network namespace" in render(tmp_path, strategy="multi_worker_mirrored",
                                                                 num_workers=2)
    single = render(tmp_path)
    assert "netns_exec" not in single and "network:" not in single


def test_readme_slurm_example_dry_runs_on_a_machine_without_the_nodes(tmp_path):
    """README's Slurm example, as printed but with --dry_run and more cores than this machine has."""
    from test_engine_cores import fake_slurm

    args = ["--launcher=slurm", "--strategy=multi_worker_mirrored", "--num_workers=4", "--slurm_nodes=2",
            f"--cores_per_worker={MORE}", "--slurm_partition=batch", "--slurm_time=00:30:00",
            "--slurm_account=myproj", f"--logdir={tmp_path / 'runs'}", "--model=resnet50", "--batch_size=32",
            "--dry_run"]
    result = run_cli(*args, env={"PATH": fake_slurm(tmp_path)}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"#SBATCH --cpus-per-task={MORE}" in result.stdout and "#SBATCH --partition=batch" in result.stdout
    assert "not checked here (sinfo failed" in result.stdout
    assert not (tmp_path / "runs").exists()
    refused = run_cli(*args, env={"PATH": fake_slurm(tmp_path, f"{MORE}\\n")}, timeout=120)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"tfbench: error: --cores_per_worker={MORE} needs {2 * MORE} CPUs per node (2 task(s) x {MORE}) and the "
        f"largest node of partition batch has {MORE} (sinfo)"]


def test_a_slurm_dry_run_needs_no_slurm_here_but_the_run_does(tmp_path):
    """To read the sbatch script before logging in to the cluster: the dry run warns, the run refuses."""
    path = f"{os.path.dirname(os.sys.executable)}{os.pathsep}{tmp_path / 'empty'}"
    args = ["--launcher=slurm", "--strategy=multi_worker_mirrored", "--num_workers=2", f"--logdir={tmp_path / 'runs'}"]
    dry = run_cli(*args, "--dry_run", env={"PATH": path}, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("tfbench: warning: the run itself would be refused here: --launcher=slurm needs "
                                 "Slurm's sbatch")
    assert "#SBATCH --ntasks-per-node=2" in dry.stdout and "not checked here (sinfo is not on PATH)" in dry.stdout
    real = run_cli(*args, env={"PATH": path}, timeout=120)
    assert real.returncode == 2 and real.stderr.startswith("tfbench: error: --launcher=slurm needs Slurm's sbatch")
    assert not (tmp_path / "runs").exists()


def test_the_hybrid_on_slurm_shows_its_ps_first_and_its_ranks_after(tmp_path, outside_slurm):
    pytest.importorskip("horovod")
    config = dict(launcher="slurm", strategy="hybrid", model="dlrm", num_workers=2, num_ps=2, slurm_nodes=2)
    out = render(tmp_path, checked_plan(RunConfig(**config)), **config)
    assert [line.split(",")[0] for line in out.splitlines() if "Slurm rank" in line] == [
        "ps_0: Slurm rank 0", "ps_1: Slurm rank 1", "worker_0: Slurm rank 2 = Horovod rank 0",
        "worker_1: Slurm rank 3 = Horovod rank 1"]
    assert "TFBENCH_HOROVOD_RENDEZVOUS=" in out and "SlurmClusterResolver gives it its role" in out
    assert "worker_1: Slurm rank 3 = Horovod rank 1, task 0 of node 1" in out
