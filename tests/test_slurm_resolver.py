"""tfbench's SlurmClusterResolver wrapper, with SLURM_* variables set as srun sets them: every
rank gets the right chief/ps/worker role and the same cluster spec on CPU-only nodes, where the
resolver as shipped fails; and the TaskSpec the task entry builds from it."""
import shutil

import pytest

from cluster.launchers import resolved_task
from cluster.plan.topology import make_plan
from cluster.slurm import resolver as slurm_resolver
from tfbench.config import RunConfig

PS = make_plan(RunConfig(strategy="parameter_server", num_workers=2, num_ps=1, hosts=("slurm-node",)))
MWMS = make_plan(RunConfig(strategy="multi_worker_mirrored", num_workers=2, hosts=("slurm-node",)))


def srun_env(monkeypatch, rank, nodelist="n[1-2]", tasks_per_node="2(x2)", num_tasks=4, cpus=None):
    for key, value in {"SLURM_PROCID": rank, "SLURM_STEP_NODELIST": nodelist, "SLURM_NODELIST": nodelist,
                       "SLURM_STEP_TASKS_PER_NODE": tasks_per_node, "SLURM_STEP_NUM_TASKS": num_tasks,
                       "SLURM_NTASKS": num_tasks, "SLURM_STEP_NUM_NODES": nodelist.count("-") + 1}.items():
        monkeypatch.setenv(key, str(value))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    if cpus:
        monkeypatch.setenv("SLURM_CPUS_PER_TASK", str(cpus))


@pytest.mark.slow  # TensorFlow's SlurmClusterResolver
def test_shipped_resolver_fails_on_cpu_only_nodes(monkeypatch):
    from tfbench.framework.tf_import import tf

    srun_env(monkeypatch, 0)
    if shutil.which("nvidia-smi") is None:
        with pytest.raises(Exception):
            tf.distribute.cluster_resolver.SlurmClusterResolver(jobs={"worker": 4})
    with pytest.raises(ValueError):
        tf.distribute.cluster_resolver.SlurmClusterResolver(jobs={"worker": 4}, gpus_per_node=0).cluster_spec()


@pytest.mark.slow  # TensorFlow's SlurmClusterResolver
def test_parameter_server_roles_across_two_nodes(monkeypatch):
    seen = {}
    for rank in range(4):
        srun_env(monkeypatch, rank)
        r = slurm_resolver.resolver(PS, port_base=9000)
        spec = r.cluster_spec().as_dict()
        seen[rank] = (r.task_type, r.task_id)
        assert spec == {"chief": ["n1:9000"], "ps": ["n1:9001"], "worker": ["n2:9000", "n2:9001"]}
        assert r.num_accelerators() == {"GPU": 0}
        assert "CUDA_VISIBLE_DEVICES" not in __import__("os").environ  # never set by the resolver
    assert seen == {0: ("chief", 0), 1: ("ps", 0), 2: ("worker", 0), 3: ("worker", 1)}


@pytest.mark.slow  # TensorFlow's SlurmClusterResolver
def test_uneven_tasks_per_node_and_port_from_environment(monkeypatch):
    monkeypatch.setenv(slurm_resolver.PORT_BASE_ENV, "7100")
    srun_env(monkeypatch, 3, nodelist="a1,b7", tasks_per_node="3,1")
    r = slurm_resolver.resolver(PS)
    assert r.cluster_spec().as_dict() == {"chief": ["a1:7100"], "ps": ["a1:7101"], "worker": ["a1:7102", "b7:7100"]}
    assert (r.task_type, r.task_id) == ("worker", 1)


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert slurm_resolver.visible_gpus() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert slurm_resolver.visible_gpus() == 0


@pytest.mark.slow  # TensorFlow's SlurmClusterResolver
@pytest.mark.parametrize("plan", [PS, MWMS], ids=["ps", "mwms"])
def test_task_spec_from_the_resolver(monkeypatch, plan):
    """What tfbench.task runs as under srun: the plan's task for the rank, with the resolver's TF_CONFIG."""
    n = len(plan.tasks)
    names = []
    for rank in range(n):
        srun_env(monkeypatch, rank, nodelist="node1", tasks_per_node=str(n), num_tasks=n, cpus=2)
        monkeypatch.setenv(slurm_resolver.PORT_BASE_ENV, "9500")
        task = resolved_task.resolve(plan, "slurm")
        names.append(task.name)
        planned = plan.task(task.name)
        assert task.host == "node1" and 9500 <= task.port < 9500 + n
        assert task.tf_config["task"] == {"type": task.role, "index": task.index}
        assert task.tf_config["cluster"][task.role][task.index] == f"node1:{task.port}"
        assert (task.service, task.measures) == (planned.service, planned.measures)
        assert task.cores == () and task.intra_threads == 2
        assert task.inter_threads >= (2 if planned.service else 1)
    assert sorted(names) == sorted(t.name for t in plan.tasks)


SINFO = """#!/bin/sh
# sinfo -h -N -n n1,n2 -O NodeList:|,NodeAddr:|,StateLong:|,Reason:| : one line per node, as slurmctld answers
echo "n1|10.9.0.2|mixed|none|"
echo "n2|10.9.0.3|allocated|checked by admin x=y|"
"""


@pytest.mark.slow  # TensorFlow's SlurmClusterResolver
def test_tasks_are_addressed_at_their_nodes_nodeaddr(monkeypatch, tmp_path):
    """Node names need not resolve (a private cluster's h0, h1): the cluster spec carries the
    NodeAddr slurmctld knows each node by, in the same rank order."""
    sinfo = tmp_path / "sinfo"
    sinfo.write_text(SINFO)
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    assert slurm_resolver.node_addresses(["n2", "n1"]) == {"n1": "10.9.0.2", "n2": "10.9.0.3"}
    srun_env(monkeypatch, 3)
    r = slurm_resolver.resolver(PS, port_base=9000)
    assert r.cluster_spec().as_dict() == {"chief": ["10.9.0.2:9000"], "ps": ["10.9.0.2:9001"],
                                          "worker": ["10.9.0.3:9000", "10.9.0.3:9001"]}
    assert (r.task_type, r.task_id) == ("worker", 1)
    assert slurm_resolver.at_addresses({"worker": ["n3:1"]}, {"n1": "a"}) == {"worker": ["n3:1"]}  # unknown: kept


@pytest.mark.slow  # TensorFlow's SlurmClusterResolver
@pytest.mark.parametrize("nodes,placement", [(1, "collocated"), (2, "collocated"), (3, "separate")])
def test_hybrid_ranks_follow_the_ps_and_keep_the_resolvers_tf_config(monkeypatch, nodes, placement):
    """The hybrid's workers are Horovod ranks and TF workers at once: Slurm's first ranks are the
    ps (the resolver's sorted jobs), each worker's Horovod rank is its worker index, and its slot
    in Horovod's host plan is the node and place the layout gave it."""
    pytest.importorskip("horovod")
    from cluster.horovod import gloo as horovod_gloo
    from cluster.slurm import horovod as slurm_horovod
    from cluster.slurm import layout, steps

    config = RunConfig(strategy="hybrid", model="dlrm", num_workers=2, num_ps=1, launcher="slurm",
                       slurm_nodes=nodes, ps_placement=placement)
    plan = steps.plan_for(config)
    placed = layout.of(config, plan)
    assert placed.order == ("ps_0", "worker_0", "worker_1")
    names = [f"n{i}" for i in range(placed.num_nodes)]
    per_node = [placed.nodes.count(n) for n in range(placed.num_nodes)]
    monkeypatch.setenv(slurm_horovod.RENDEZVOUS_ENV, "127.0.0.1:7777")
    for key in horovod_gloo.rank_env(plan, 0, "a", 1, "lo"):  # rank_task sets them in os.environ: undone at the end
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    seen = {}
    for rank, node in enumerate(placed.nodes):
        srun_env(monkeypatch, rank, nodelist=",".join(names), tasks_per_node=",".join(map(str, per_node)),
                 num_tasks=len(placed.order), cpus=1)
        monkeypatch.setenv("SLURM_NODEID", str(node))
        monkeypatch.setenv("SLURM_LOCALID", str(placed.nodes[:rank].count(node)))
        monkeypatch.setenv(slurm_resolver.PORT_BASE_ENV, "9500")
        for key in ("HOROVOD_RANK", "HOROVOD_HOSTNAME"):
            monkeypatch.delenv(key, raising=False)  # the previous rank's
        task = resolved_task.resolve(plan, "slurm")
        assert task.name == placed.order[rank] and task.tf_config["task"] == {"type": task.role, "index": task.index}
        assert task.host == names[node]
        seen[task.name] = (__import__("os").environ.get("HOROVOD_RANK"), __import__("os").environ.get("HOROVOD_HOSTNAME"))
    assert seen == {"ps_0": (None, None), "worker_0": ("0", f"node{placed.nodes[1]}"),
                    "worker_1": ("1", f"node{placed.nodes[2]}")}
