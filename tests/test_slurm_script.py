"""The sbatch script tfbench writes, and the srun steps of a run: resources from the topology,
optional partition, time and account; node monitors, then every task in one step laid out node by
node in the order SlurmClusterResolver gives ranks to tasks."""

import pytest

from cluster.slurm import batch, layout, steps
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
    assert sbatch_options(script) == [  # coordinator, both ps and two workers on the first node
        "--job-name=tfbench-r1", "--nodes=2", "--ntasks-per-node=5", "--cpus-per-task=2", "--no-requeue",
        "--output=/shared/runs/r1/tasks/slurm-%j.out", f"--chdir={steps.PROJECT_ROOT}",
        "--partition=gpu", "--time=00:20:00", "--account=proj7"]
    body = script.splitlines()
    monitor = next(i for i, line in enumerate(body) if "cluster.slurm.node_monitor" in line)
    tasks = next(i for i, line in enumerate(body) if "tfbench.task" in line)
    assert body[monitor].endswith("2>&1 &") and monitor < tasks  # monitors in the background first
    assert "--task slurm" in body[tasks] and body[tasks].startswith(
        "srun --ntasks=6 --nodes=2 --distribution=arbitrary --cpus-per-task=2")
    assert body[tasks - 3:tasks] == [
        'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST" | LC_ALL=C sort))',
        """printf '%s\\n' "${nodes[0]}" "${nodes[0]}" "${nodes[0]}" "${nodes[0]}" "${nodes[0]}" "${nodes[1]}" """
        "> /shared/runs/r1/tasks/slurm.hosts  # one line per rank: chief_0, ps_0, ps_1, worker_0, worker_1, worker_2",
        "export SLURM_HOSTFILE=/shared/runs/r1/tasks/slurm.hosts"]
    assert body[-3:] == ["touch /shared/runs/r1/tasks/slurm.done  # node monitors write their summaries and stop",
                         "wait", "exit $status"]
    assert any(line.startswith("export TFBENCH_SLURM_PORT_BASE=") for line in body)
    assert all(t.cores == () and t.host == steps.PLACEHOLDER_HOST for t in plan.tasks)


def test_defaults_leave_partition_time_and_account_to_slurm():
    config = RunConfig(strategy="multi_worker_mirrored", num_workers=2, launcher="slurm")
    options = sbatch_options(batch.script(RUN, config, steps.plan_for(config)))
    assert "--ntasks-per-node=2" in options and "--nodes=1" in options and "--cpus-per-task=1" in options
    assert not [o for o in options if o.split("=")[0] in ("--partition", "--time", "--account")]


def test_steps_run_every_task_and_one_monitor_per_node():
    config = RunConfig(strategy="multi_worker_mirrored", num_workers=4, launcher="slurm", slurm_nodes=2)
    plan = steps.plan_for(config)
    tasks = steps.tasks_step(RUN, config, plan)
    assert tasks[:7] == ["srun", "--ntasks=4", "--nodes=2", "--distribution=arbitrary", "--cpus-per-task=1",
                         "--kill-on-bad-exit=1", "--overlap"]
    assert tasks[-4:] == ["--run_dir", RUN.path, "--task", "slurm"]
    monitor = steps.monitor_step(RUN, config, plan)
    assert "--ntasks=2" in monitor and "--ntasks-per-node=1" in monitor and "--overlap" in monitor
    env = steps.environment(RUN, 9100)
    assert env["TFBENCH_SLURM_PORT_BASE"] == "9100"
    assert steps.PROJECT_ROOT in env["PYTHONPATH"].split(":")


def test_port_base_has_room_for_the_tasks_of_a_node():
    assert steps.pick_port_base(RunConfig(base_port=7000), 4) == 7000
    for _ in range(50):  # below the ephemeral range, which srun's sockets and outgoing connections draw from
        base = steps.pick_port_base(RunConfig(), 4)
        assert steps.PORT_FLOOR <= base and base + 4 <= steps.ephemeral_low()


def layout_of(**flags):
    config = RunConfig(launcher="slurm", **flags)
    return layout.of(config, steps.plan_for(config))


@pytest.mark.parametrize("flags, nodes", [
    (dict(strategy="multi_worker_mirrored", num_workers=3, slurm_nodes=2), (0, 0, 1)),
    (dict(strategy="horovod", num_workers=4, slurm_nodes=0), (0, 1, 2, 3)),
    (dict(strategy="parameter_server", num_workers=2, slurm_nodes=2), (0, 0, 0, 1)),  # chief, ps, w0 | w1
    (dict(strategy="parameter_server", num_workers=2, ps_placement="separate", slurm_nodes=0), (0, 1, 2, 3)),
    (dict(strategy="parameter_server", num_workers=4, num_ps=2, ps_placement="separate", slurm_nodes=5),
     (0, 1, 2, 3, 3, 4, 4)),
    (dict(strategy="parameter_server", num_workers=2, ps_placement="separate", slurm_nodes=2), (0, 0, 1, 1)),
])
def test_layout_keeps_ranks_of_a_node_together_and_places_the_ps(flags, nodes):
    placed = layout_of(**flags)
    assert placed.nodes == nodes and list(placed.nodes) == sorted(placed.nodes)
    assert placed.num_nodes == max(nodes) + 1


def test_layout_ranks_follow_the_resolver_and_separate_ps_get_their_own_nodes():
    placed = layout_of(strategy="parameter_server", num_workers=2, ps_placement="separate", slurm_nodes=0)
    assert placed.order == ("chief_0", "ps_0", "worker_0", "worker_1")
    assert [placed.tasks_on(n) for n in range(4)] == [["chief_0"], ["ps_0"], ["worker_0"], ["worker_1"]]
    config = RunConfig(launcher="slurm", strategy="parameter_server", num_workers=2, ps_placement="separate")
    assert "--ps_placement=separate on one Slurm node" in steps.plan_for(config).warnings[-1]


def test_hostfile_inside_an_allocation_names_the_nodes_sorted(tmp_path, monkeypatch):
    from tfbench.results.rundir import RunDir

    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.parent.mkdir()
    scontrol.write_text("#!/bin/sh\nprintf 'n2\\nn10\\nn1\\n'\n")
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{scontrol.parent}:{__import__('os').environ['PATH']}")
    run = RunDir(str(tmp_path / "run"))
    path = layout.write_hostfile(run, layout_of(strategy="multi_worker_mirrored", num_workers=4, slurm_nodes=3),
                                 "n[1-2,10]")
    assert open(path).read().split() == ["n1", "n1", "n10", "n2"]  # sorted as text, as the resolver sorts them
    with pytest.raises(RuntimeError, match="has 3 node"):
        layout.write_hostfile(run, layout_of(strategy="multi_worker_mirrored", num_workers=4, slurm_nodes=4), "x")
