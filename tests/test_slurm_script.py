"""The sbatch script tfbench writes, and the srun steps of a run: resources from the topology,
optional partition, time and account; node monitors, then every task in one step."""

from cluster.slurm import batch, steps
from tfbench.config import RunConfig
from tfbench.results.rundir import RunDir

RUN = RunDir("/shared/runs/r1")


def sbatch_options(script):
    return [line.split(" ", 1)[1] for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_parameter_server_script_on_two_nodes():
    config = RunConfig(strategy="parameter_server", num_workers=3, num_ps=2, cores_per_worker=2, launcher="slurm",
                       slurm_nodes=2, slurm_partition="gpu", slurm_time="00:20:00", slurm_account="proj7")
    plan = steps.plan_for(config)
    script = batch.script(RUN, config, plan)
    assert script.startswith("#!/bin/bash\n")
    assert sbatch_options(script) == [
        "--job-name=tfbench-r1", "--nodes=2", "--ntasks=6", "--cpus-per-task=2",
        "--output=/shared/runs/r1/tasks/slurm-%j.out", f"--chdir={steps.PROJECT_ROOT}",
        "--partition=gpu", "--time=00:20:00", "--account=proj7"]
    body = script.splitlines()
    monitor = next(i for i, line in enumerate(body) if "cluster.slurm.node_monitor" in line)
    tasks = next(i for i, line in enumerate(body) if "tfbench.task" in line)
    assert body[monitor].endswith("2>&1 &") and monitor < tasks  # monitors in the background first
    assert "--task slurm" in body[tasks] and body[tasks].startswith("srun --ntasks=6 --nodes=2 --cpus-per-task=2")
    assert body[-3:] == ["touch /shared/runs/r1/tasks/slurm.done  # node monitors write their summaries and stop",
                         "wait", "exit $status"]
    assert any(line.startswith("export TFBENCH_SLURM_PORT_BASE=") for line in body)
    assert all(t.cores == () and t.host == steps.PLACEHOLDER_HOST for t in plan.tasks)


def test_defaults_leave_partition_time_and_account_to_slurm():
    config = RunConfig(strategy="multi_worker_mirrored", num_workers=2, launcher="slurm")
    options = sbatch_options(batch.script(RUN, config, steps.plan_for(config)))
    assert "--ntasks=2" in options and "--nodes=1" in options and "--cpus-per-task=1" in options
    assert not [o for o in options if o.split("=")[0] in ("--partition", "--time", "--account")]


def test_steps_run_every_task_and_one_monitor_per_node():
    config = RunConfig(strategy="multi_worker_mirrored", num_workers=4, launcher="slurm", slurm_nodes=2)
    plan = steps.plan_for(config)
    tasks = steps.tasks_step(RUN, config, plan)
    assert tasks[:6] == ["srun", "--ntasks=4", "--nodes=2", "--cpus-per-task=1", "--kill-on-bad-exit=1", "--overlap"]
    assert tasks[-4:] == ["--run_dir", RUN.path, "--task", "slurm"]
    monitor = steps.monitor_step(RUN, config, plan)
    assert "--ntasks=2" in monitor and "--ntasks-per-node=1" in monitor and "--overlap" in monitor
    env = steps.environment(RUN, 9100)
    assert env["TFBENCH_SLURM_PORT_BASE"] == "9100"
    assert steps.PROJECT_ROOT in env["PYTHONPATH"].split(":")


def test_port_base_has_room_for_the_tasks_of_a_node():
    assert steps.pick_port_base(RunConfig(base_port=7000), 4) == 7000
    base = steps.pick_port_base(RunConfig(), 4)
    assert 1024 < base and base + 4 < 65536
