"""Kubernetes manifests: the TFJob and the Indexed Job + headless Service have the structure the
Kubeflow training operator and Kubernetes expect, and every pod's TF_CONFIG (set by the operator,
or built from the pod index) round-trips through TFConfigClusterResolver to the plan's task.
No Kubernetes cluster was available to run them here; these tests check the manifests only."""
import json

import pytest
import yaml

from cluster import k8s
from cluster.k8s_index import tf_config_for_index
from cluster.launchers import resolved_task
from cluster.spec import ClusterPlan
from conftest import run_cli
from tfbench.config import RunConfig

TARGET = k8s.Target(image="registry.example/tfbench:1", workdir="/tfbench", namespace="bench", pvc="runs-rwx")
PS = RunConfig(model="tiny", image_size=16, strategy="parameter_server", num_workers=2, num_ps=2,
               cores_per_worker=2, run_id="PS_Run.1", logdir="/runs")
MWMS = RunConfig(model="tiny", image_size=16, strategy="multi_worker_mirrored", num_workers=3, run_id="mwms",
                 logdir="/runs")


@pytest.fixture
def resolver_for(monkeypatch):
    """TFConfigClusterResolver reads TF_CONFIG on every call: it stays set until the next pod's."""
    from tfbench.framework.tf_import import tf

    def resolve(tf_config):
        monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
        return tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return resolve


def plan_in(config_map) -> ClusterPlan:
    assert config_map["kind"] == "ConfigMap"
    assert json.loads(config_map["data"]["config.json"])["run_id"] in ("PS_Run.1", "mwms")
    return ClusterPlan.from_dict(json.loads(config_map["data"]["plan.json"]))


def operator_tf_config(job, replica_type, index):
    """TF_CONFIG as Kubeflow's training operator sets it: one <job>-<type>-<i>.<ns>.svc:<port> per
    replica of every type, and the pod's own type (lower case) and index."""
    name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    cluster = {}
    for rtype, spec in job["spec"]["tfReplicaSpecs"].items():
        port = spec["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
        cluster[rtype.lower()] = [f"{name}-{rtype.lower()}-{i}.{ns}.svc:{port}" for i in range(spec["replicas"])]
    return {"cluster": cluster, "task": {"type": replica_type.lower(), "index": index}}


@pytest.mark.slow  # TensorFlow's TFConfigClusterResolver
@pytest.mark.parametrize("config", [PS, MWMS], ids=["ps", "mwms"])
def test_tfjob_structure_and_operator_tf_config(config, resolver_for):
    config_map, job = k8s.tfjob(config, TARGET)
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "TFJob")
    assert job["metadata"]["name"] == k8s.k8s_name(config.run_id) and job["metadata"]["namespace"] == "bench"
    specs = job["spec"]["tfReplicaSpecs"]
    expected = {"Chief": 1, "Worker": 2, "PS": 2} if config is PS else {"Worker": 3}
    assert {k: v["replicas"] for k, v in specs.items()} == expected
    plan = plan_in(config_map)
    for rtype, spec in specs.items():
        pod = spec["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == "tensorflow" and container["image"] == TARGET.image
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
        cpus = "2" if (rtype == "Worker" and config is PS) else "1"
        assert container["resources"]["requests"]["cpu"] == cpus == container["resources"]["limits"]["cpu"]
        assert "--task tf_config" in container["command"][-1]
        assert {v["name"] for v in pod["volumes"]} == {"runs", "run-config"}
        for i in range(spec["replicas"]):
            resolver = resolver_for(operator_tf_config(job, rtype, i))
            task = resolved_task.from_resolver(plan, resolver, cpus=int(cpus))
            assert (task.role, task.index) == (rtype.lower(), i)
            assert task.host == f"{job['metadata']['name']}-{rtype.lower()}-{i}.bench.svc" and task.port == 2222
            assert resolver.cluster_spec().as_dict() == plan.cluster_spec
            assert task.intra_threads == int(cpus)


@pytest.mark.slow  # TensorFlow's TFConfigClusterResolver
@pytest.mark.parametrize("config", [PS, MWMS], ids=["ps", "mwms"])
def test_indexed_job_tf_config_from_pod_index(config, resolver_for):
    config_map, service, job = k8s.indexed_job(config, TARGET)
    name = job["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"] == {"job-name": name}
    spec = job["spec"]
    plan = plan_in(config_map)
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == len(plan.tasks)
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"] == name
    assert spec["template"]["metadata"]["labels"] == {"job-name": name}
    assert pod["containers"][0]["name"] == "tensorflow" and "cluster.k8s_index" in pod["containers"][0]["command"][-1]
    for i, planned in enumerate(plan.tasks):
        resolver = resolver_for(tf_config_for_index(plan, i))
        assert (resolver.task_type, resolver.task_id) == (planned.role, planned.index)
        own = resolver.cluster_spec().as_dict()[planned.role][planned.index]
        assert own == f"{name}-{i}.{name}.bench.svc:2222"
    if config is PS:  # ps and workers never exit: the Job succeeds when the chief does
        finishing = [str(i) for i, t in enumerate(plan.tasks) if t.role == "chief"]
        assert spec["successPolicy"] == {"rules": [{"succeededIndexes": ",".join(finishing)}]}
    else:
        assert "successPolicy" not in spec
    with pytest.raises(ValueError):
        tf_config_for_index(plan, len(plan.tasks))


def test_cli_writes_both_files(tmp_path):
    proc = run_cli("--model=tiny", "--image_size=16", "--strategy=multi_worker_mirrored", "--num_workers=2",
                   "--run_id=cli", f"--out_dir={tmp_path}", module="cluster.k8s", timeout=60)
    assert proc.returncode == 0, proc.stderr
    for name in ("tfjob.yaml", "indexed-job.yaml"):
        with open(tmp_path / name) as f:
            docs = list(yaml.safe_load_all(f))
        assert docs[0]["kind"] == "ConfigMap" and docs[-1]["kind"] in ("TFJob", "Job")
    refused = run_cli("--strategy=horovod", "--num_workers=2", f"--out_dir={tmp_path}", module="cluster.k8s")
    assert refused.returncode == 2 and "MPIJob" in refused.stderr
