"""Cluster plans: roles, counts, indices, chief, ps placement, cores, and TF_CONFIG that
TensorFlow's own resolver reads back."""
import json

import pytest

from cluster.plan.cores import split_cores
from cluster.plan.ports import PortAllocator
from cluster.plan.topology import make_plan, with_new_ports
from conftest import run_cli
from tfbench.config import RunConfig


def plan_for(tmp_path, cores=(0, 1, 2, 3), **kw):
    return make_plan(RunConfig(logdir=str(tmp_path), **kw), cores=cores)


def resolve(task):
    """(task type, task index, cluster spec) as TensorFlow's TFConfigClusterResolver reads them."""
    import os

    from tfbench.framework.tf_import import tf

    os.environ["TF_CONFIG"] = json.dumps(task.tf_config)
    try:
        r = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return r.task_type, r.task_id, r.cluster_spec().as_dict()
    finally:
        del os.environ["TF_CONFIG"]


def test_default_is_one_task_with_all_cores(tmp_path):
    plan = plan_for(tmp_path)
    assert [t.name for t in plan.tasks] == ["worker_0"]
    assert plan.tasks[0].cores == (0, 1, 2, 3) and plan.tasks[0].tf_config is None
    assert plan.tasks[0].intra_threads == 4


@pytest.mark.slow  # TensorFlow's TFConfigClusterResolver
def test_multi_worker_mirrored(tmp_path):
    plan = plan_for(tmp_path, strategy="multi_worker_mirrored", num_workers=3, cores=(0, 1, 2))
    assert [t.name for t in plan.tasks] == ["worker_0", "worker_1", "worker_2"]
    assert set(plan.cluster_spec) == {"worker"}  # worker 0 is the chief
    assert [t.cores for t in plan.tasks] == [(0,), (1,), (2,)]
    assert [t.intra_threads for t in plan.tasks] == [1, 1, 1]
    for t in plan.tasks:
        assert resolve(t) == ("worker", t.index, plan.cluster_spec)
    ports = [t.port for t in plan.tasks]
    assert len(set(ports)) == 3 and all(ports)


@pytest.mark.slow  # TensorFlow's TFConfigClusterResolver
@pytest.mark.parametrize("placement", ["collocated", "separate"])
def test_parameter_server(tmp_path, placement):
    plan = plan_for(tmp_path, strategy="parameter_server", num_workers=2, num_ps=2, ps_placement=placement,
                    cores=(0, 1, 2))
    names = [t.name for t in plan.tasks]
    assert names == ["chief_0", "worker_0", "worker_1", "ps_0", "ps_1"]
    assert set(plan.cluster_spec) == {"chief", "worker", "ps"}
    assert len(plan.cluster_spec["ps"]) == 2 and len(plan.cluster_spec["worker"]) == 2
    workers = {t.index: t for t in plan.tasks if t.role == "worker"}
    ps = [t for t in plan.tasks if t.role == "ps"]
    assert all(t.service for t in ps + list(workers.values()))
    # tf.distribute.Server tasks deadlock on one inter-op thread, even on a single core
    assert all(t.inter_threads >= 2 for t in ps + list(workers.values()))
    assert workers[0].intra_threads == len(workers[0].cores)
    assert not plan.task("chief_0").service
    # 3 cores: one per worker, the spare one to ps_0; ps_1 and the coordinator share the workers'
    assert ps[0].cores == (2,) and not ps[0].shares_cores_with
    assert ps[1].cores == (0, 1) and set(ps[1].shares_cores_with) == {"worker_0", "worker_1", "chief_0"}
    assert "ps_1" in workers[0].shares_cores_with and "ps_1" in workers[1].shares_cores_with
    assert any("ps_1" in w for w in plan.warnings)
    for t in plan.tasks:
        assert resolve(t) == (t.role, t.index, plan.cluster_spec)


@pytest.mark.parametrize("placement", ["collocated", "separate"])
def test_ps_and_coordinator_get_cores_of_their_own_when_the_machine_has_them(tmp_path, placement):
    """4 cores, 2 workers: each worker, the ps and the coordinator get a core of their own
    (the collocated ps used to take worker_0's core, so worker_0 ran slower than worker_1)."""
    plan = plan_for(tmp_path, strategy="parameter_server", num_workers=2, num_ps=1, ps_placement=placement,
                    cores=(0, 1, 2, 3))
    cores = {t.name: set(t.cores) for t in plan.tasks}
    assert cores["worker_0"] == {0} and cores["worker_1"] == {1}
    assert cores["ps_0"].isdisjoint(cores["worker_0"] | cores["worker_1"])
    assert cores["chief_0"].isdisjoint(cores["worker_0"] | cores["worker_1"] | cores["ps_0"])
    assert all(not t.shares_cores_with for t in plan.tasks)
    assert not plan.warnings


def test_one_worker_ps_baseline_keeps_the_ps_off_the_workers_core(tmp_path):
    plan = plan_for(tmp_path, strategy="parameter_server", num_workers=1, cores_per_worker=1, cores=(0, 1))
    assert plan.task("worker_0").cores == (0,) and plan.task("ps_0").cores == (1,)
    # the coordinator has no core left: it shares, and both sides say so
    assert plan.task("chief_0").cores == (0,) and plan.task("chief_0").shares_cores_with == ("worker_0",)
    assert plan.task("worker_0").shares_cores_with == ("chief_0",)


def test_gpu_plan_gives_each_local_task_its_own_gpu(tmp_path):
    """What each task would see on a GPU machine: its local index, memory growth on."""
    mwms = plan_for(tmp_path, strategy="multi_worker_mirrored", num_workers=3, device="gpu", hosts=("a", "b"))
    seen = {t.name: (t.host, t.env.get("CUDA_VISIBLE_DEVICES")) for t in mwms.tasks}
    assert seen == {"worker_0": ("a", "0"), "worker_1": ("b", "0"), "worker_2": ("a", "1")}
    assert all(t.env.get("TF_FORCE_GPU_ALLOW_GROWTH") == "true" for t in mwms.tasks)
    hvd = plan_for(tmp_path, strategy="horovod", num_workers=3, device="gpu", hosts=("a", "b"))
    # horovodrun -H a:2,b:1 puts ranks 0 and 1 on a, rank 2 on b: each rank's GPU is its local rank
    assert hvd.horovod_hosts == "a:2,b:1"
    assert [(t.horovod_rank, t.host, t.env["CUDA_VISIBLE_DEVICES"]) for t in hvd.tasks] == [
        (0, "a", "0"), (1, "a", "1"), (2, "b", "0")]
    ps = plan_for(tmp_path, strategy="parameter_server", num_workers=2, device="gpu")
    assert [ps.task(n).env["CUDA_VISIBLE_DEVICES"] for n in ("worker_0", "worker_1", "ps_0", "chief_0")] == [
        "0", "1", "-1", "-1"]
    mirrored = plan_for(tmp_path, strategy="mirrored", num_local_devices=2, device="gpu")
    assert mirrored.tasks[0].env["CUDA_VISIBLE_DEVICES"] == "0,1"
    cpu = plan_for(tmp_path, strategy="multi_worker_mirrored", num_workers=2)
    assert all("CUDA_VISIBLE_DEVICES" not in t.env for t in cpu.tasks)


def test_separate_ps_on_hosts_of_their_own(tmp_path):
    plan = plan_for(tmp_path, strategy="parameter_server", num_workers=2, num_ps=1, ps_placement="separate",
                    hosts=("h1", "h2", "h3"))
    assert plan.task("worker_0").host == "h1" and plan.task("worker_1").host == "h2"
    assert plan.task("ps_0").host == "h3"
    assert plan.task("ps_0").cores == ()  # remote hosts are not pinned from here
    # ports are assigned per host from the base port
    assert plan.task("chief_0").port == 2222 and plan.task("worker_0").port == 2223
    assert plan.task("ps_0").port == 2222


def test_horovod_has_host_slots_and_ranks(tmp_path):
    plan = plan_for(tmp_path, strategy="horovod", num_workers=2, cores=(0, 1))
    assert plan.horovod_hosts == "localhost:2"
    assert [t.horovod_rank for t in plan.tasks] == [0, 1]
    assert all(t.tf_config is None for t in plan.tasks)
    multi = plan_for(tmp_path, strategy="horovod", num_workers=3, hosts=("a", "b"))
    assert multi.horovod_hosts == "a:2,b:1"


def test_cores_per_worker_pins_fewer_cores(tmp_path):
    plan = plan_for(tmp_path, strategy="multi_worker_mirrored", num_workers=1, cores_per_worker=1, cores=(0, 1))
    assert plan.tasks[0].cores == (0,) and plan.tasks[0].intra_threads == 1
    plan = plan_for(tmp_path, strategy="horovod", num_workers=2, cores_per_worker=2, cores=(0, 1))
    assert plan.warnings, "2 workers x 2 cores cannot fit on 2 cores"
    plan = plan_for(tmp_path, strategy="mirrored", num_local_devices=2, cores_per_worker=1, cores=(0, 1, 2))
    assert plan.tasks[0].cores == (0, 1)


def test_too_few_cores_warns(tmp_path):
    plan = plan_for(tmp_path, strategy="multi_worker_mirrored", num_workers=3, cores=(0, 1))
    assert plan.warnings and "share 2 cores" in plan.warnings[0]
    groups, spare, enough = split_cores((0, 1), 3)
    assert not enough and groups == [(0,), (1,), (0,)] and spare == ()


def test_new_ports_rewrite_every_tf_config(tmp_path):
    plan = plan_for(tmp_path, strategy="multi_worker_mirrored", num_workers=2)
    old = plan.task("worker_1").port
    replanned = with_new_ports(plan, ["worker_1"], PortAllocator())
    new = replanned.task("worker_1").port
    assert new != old
    for t in replanned.tasks:
        assert t.tf_config["cluster"]["worker"][1].endswith(f":{new}")


def test_plan_cli_prints_tf_config_and_exports(tmp_path):
    out = run_cli("--strategy=parameter_server", "--num_workers=2", "--num_ps=1", f"--logdir={tmp_path}",
                  module="cluster.by_hand", timeout=60)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert [t["role"] for t in plan["tasks"]] == ["chief", "worker", "worker", "ps"]
    exports = run_cli("--strategy=multi_worker_mirrored", "--num_workers=2", "--format=export",
                      f"--logdir={tmp_path}", module="cluster.by_hand", timeout=60)
    assert exports.returncode == 0, exports.stderr
    assert exports.stdout.count("export TF_CONFIG=") == 2
    bad = run_cli("--strategy=parameter_server", "--num_workers=0", module="cluster.by_hand", timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("tfbench: error:")
