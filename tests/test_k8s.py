"""Kubernetes manifests: every object tfbench writes (ConfigMap, Service, Job, JobSet, TFJob) passes
its kind's published schema offline and the name rules of the API server and the kind's
controller (tests/k8s_schemas.py), whatever the run id; each pod requests its own role's CPUs;
and every pod's TF_CONFIG (set by the training operator, or built by cluster.k8s.index from the
pod's index) round-trips through TFConfigClusterResolver to the plan's task at the DNS name the
controller gives that pod. No Kubernetes cluster was available to run them here."""
import copy
import json
import subprocess
import sys

import pytest
import yaml
from k8s_schemas import dns1035_label, name_errors, rejected, schema_errors

from cluster.k8s import manifests as k8s
from cluster.k8s.index import tf_config_for
from cluster.launchers import resolved_task
from cluster.plan.spec import ClusterPlan
from conftest import ROOT, run_cli
from tfbench.config import RunConfig
from tfbench.results.rundir import default_run_id

TARGET = k8s.Target(image="registry.example/tfbench:1", workdir="/tfbench", namespace="bench", pvc="runs-rwx")
DEFAULT_ID = "20261125-188503-resnet50-multi-worker-mirrored-w2"
PS = RunConfig(model="tiny", image_size=16, strategy="parameter_server", num_workers=2, num_ps=2,
               cores_per_worker=4, run_id="PS_Run.1", logdir="/runs")
MWMS = RunConfig(model="tiny", image_size=16, strategy="multi_worker_mirrored", num_workers=3, run_id=DEFAULT_ID,
                 logdir="/runs")
HYBRID = RunConfig(model="dlrm", strategy="hybrid", num_workers=2, num_ps=2, run_id="hybrid-run", logdir="/runs")
CONFIGS = {"ps": PS, "mwms": MWMS, "hybrid": HYBRID}
BUILDERS = {"jobset": k8s.jobset, "tfjob": k8s.tfjob, "indexed-jobs": k8s.indexed_jobs}


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
    return ClusterPlan.from_dict(json.loads(config_map["data"]["plan.json"]))


@pytest.mark.parametrize("run_id", [DEFAULT_ID, default_run_id("resnet50", "multi_worker_mirrored", 2), "PS_Run.1",
                                    "mwms", "9" * 128, "-._-", "A" * 40, "run." + "x" * 120],
                         ids=["default", "timestamped", "dotted", "short", "long_digits", "punctuation", "upper",
                              "long"])
def test_names_are_dns_1035_labels_whatever_the_run_id(run_id):
    name = k8s.k8s_name(run_id)
    assert dns1035_label(name) and len(name) <= k8s.NAME_MAX
    assert k8s.k8s_name(run_id) == name  # the same run always names the same objects
    if run_id == "mwms":
        assert name == "mwms"  # a run id that is a valid name already stays as it is


def test_different_run_ids_name_different_objects():
    ids = [DEFAULT_ID, DEFAULT_ID.replace("w2", "w3"), "PS_Run.1", "ps-run-1", "PS-RUN-1", "a" * 60, "a" * 61]
    assert len({k8s.k8s_name(i) for i in ids}) == len(ids)


LONG = MWMS.replace(run_id="9" * 128, num_workers=120)


@pytest.mark.parametrize("builder", BUILDERS, ids=list(BUILDERS))
@pytest.mark.parametrize("config", [PS, MWMS, LONG], ids=["ps", "mwms", "long"])
def test_every_object_passes_its_schema_and_name_rules(config, builder):
    objects = BUILDERS[builder](config, TARGET)
    assert [o["kind"] for o in objects][:1] == ["ConfigMap"]
    for obj in objects:
        assert rejected(obj) == [], (obj["kind"], obj["metadata"]["name"])


def test_the_checks_reject_what_a_cluster_would():
    """The schema and name checks are not vacuous: a typo, a wrong type or a bad name fails."""
    _, job = k8s.jobset(PS, TARGET)
    typo = copy.deepcopy(job)
    typo["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["cpus"] = 1
    assert any("'cpus' was unexpected" in e for e in schema_errors(typo))
    wrong = copy.deepcopy(job)
    wrong["spec"]["replicatedJobs"][0]["replicas"] = "1"
    assert schema_errors(wrong)
    tfjob = k8s.tfjob(PS, TARGET)[1]
    tfjob["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "two"
    assert schema_errors(tfjob)
    old_name = copy.deepcopy(job)  # what the last 40 characters of a run id used to give
    old_name["metadata"]["name"] = "188503-resnet50-multi-worker-mirrored-w2"
    assert any("not a DNS-1035 label" in e for e in name_errors(old_name))
    long_name = copy.deepcopy(job)
    long_name["metadata"]["name"] = "a" * 50  # 50 + len("-worker-0-1-abcde") > 63
    assert any("JobSet pod name" in e for e in name_errors(long_name))
    service = k8s.indexed_jobs(PS, TARGET)[1]
    service["metadata"]["name"] = "1" + service["metadata"]["name"]
    assert name_errors(service)


def _pods(obj):
    """(role, number of pods, container) per role of a JobSet, TFJob or plain Job."""
    if obj["kind"] == "JobSet":
        for rjob in obj["spec"]["replicatedJobs"]:
            spec = rjob["template"]["spec"]
            yield rjob["name"], rjob["replicas"] * spec["completions"], spec["template"]["spec"]["containers"][0]
    elif obj["kind"] == "TFJob":
        for rtype, replica in obj["spec"]["tfReplicaSpecs"].items():
            yield rtype.lower(), replica["replicas"], replica["template"]["spec"]["containers"][0]
    elif obj["kind"] == "Job":
        role = obj["metadata"]["name"].rpartition("-")[2]
        yield role, obj["spec"]["completions"], obj["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("builder", BUILDERS, ids=list(BUILDERS))
def test_each_pod_requests_its_roles_cores(builder):
    """2 workers x 4 cores + 2 ps + the chief: 11 CPUs, not every pod the largest task's 4."""
    requested, pods = {}, 0
    for obj in BUILDERS[builder](PS, TARGET):
        for role, n, container in _pods(obj):
            cpu = container["resources"]["requests"]["cpu"]
            assert cpu == container["resources"]["limits"]["cpu"]
            requested[role] = (n, int(cpu))
            pods += n
    assert requested == {"chief": (1, 1), "ps": (2, 1), "worker": (2, 4)}
    assert sum(n * cpu for n, cpu in requested.values()) == 11 and pods == 5


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
@pytest.mark.parametrize("config", CONFIGS.values(), ids=list(CONFIGS))
def test_tfjob_operator_tf_config_round_trips(config, resolver_for):
    config_map, job = k8s.tfjob(config, TARGET)
    specs = job["spec"]["tfReplicaSpecs"]
    expected = {"ps": {"Chief": 1, "PS": 2, "Worker": 2}, "hybrid": {"PS": 2, "Worker": 2}}.get(
        next(k for k, c in CONFIGS.items() if c is config), {"Worker": 3})
    assert {k: v["replicas"] for k, v in specs.items()} == expected
    plan = plan_in(config_map)
    for rtype, spec in specs.items():
        (container,) = spec["template"]["spec"]["containers"]
        assert container["name"] == "tensorflow"
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
        assert "--task tf_config" in container["command"][-1]
        cpus = int(container["resources"]["requests"]["cpu"])
        for i in range(spec["replicas"]):
            resolver = resolver_for(operator_tf_config(job, rtype, i))
            task = resolved_task.from_resolver(plan, resolver, cpus=cpus)
            assert (task.role, task.index) == (rtype.lower(), i) and task.port == 2222
            assert task.host == f"{job['metadata']['name']}-{rtype.lower()}-{i}.bench.svc"
            assert resolver.cluster_spec().as_dict() == plan.cluster_spec
            assert task.intra_threads == cpus


def indexed_pods(objects):
    """(role, JOB_COMPLETION_INDEX, the pod's DNS name, the command's role argument) of every pod,
    named the way the controllers name them: a JobSet's pod is <jobset>-<rjob>-<job index>-<pod
    index> in the JobSet's subdomain (the JobSet's name unless set); a plain Indexed Job's pod is
    <job>-<index> in the pod template's subdomain."""
    for obj in objects:
        if obj["kind"] == "JobSet":
            subdomain = obj["spec"]["network"].get("subdomain") or obj["metadata"]["name"]
            for rjob in obj["spec"]["replicatedJobs"]:
                spec = rjob["template"]["spec"]
                for job_index in range(rjob["replicas"]):
                    for i in range(spec["completions"]):
                        host = f"{obj['metadata']['name']}-{rjob['name']}-{job_index}-{i}.{subdomain}"
                        yield rjob["name"], i, host, spec["template"]["spec"]["containers"][0]["command"][-1]
        elif obj["kind"] == "Job":
            pod = obj["spec"]["template"]["spec"]
            job = obj["metadata"]["name"]
            for i in range(obj["spec"]["completions"]):
                yield job.rpartition("-")[2], i, f"{job}-{i}.{pod['subdomain']}", pod["containers"][0]["command"][-1]


@pytest.mark.slow  # TensorFlow's TFConfigClusterResolver
@pytest.mark.parametrize("builder", ["jobset", "indexed-jobs"])
@pytest.mark.parametrize("config", CONFIGS.values(), ids=list(CONFIGS))
def test_pod_index_tf_config_round_trips(config, builder, resolver_for):
    objects = BUILDERS[builder](config, TARGET)
    plan = plan_in(objects[0])
    seen = []
    for role, index, host, command in indexed_pods(objects):
        ranks = "python -m cluster.k8s.rendezvous /etc/tfbench/plan.json " if plan.ranked_tasks else ""
        assert f"cluster.k8s.index /etc/tfbench/plan.json {role} {ranks}python -m tfbench.task --task tf_config" in command
        resolver = resolver_for(tf_config_for(plan, role, index))
        assert (resolver.task_type, resolver.task_id) == (role, index)
        assert resolver.cluster_spec().as_dict()[role][index] == f"{host}.bench.svc:2222"
        assert resolver.cluster_spec().as_dict() == plan.cluster_spec
        seen.append(f"{role}_{index}")
    assert sorted(seen) == sorted(t.name for t in plan.tasks)
    with pytest.raises(ValueError, match="outside"):
        tf_config_for(plan, "worker", config.num_workers)


def test_jobset_succeeds_with_the_chief_of_a_parameter_server_run():
    """ps and workers serve until stopped: the JobSet completes when the chief does."""
    ps_set, mwms_set = k8s.jobset(PS, TARGET)[1], k8s.jobset(MWMS, TARGET)[1]
    assert [r["name"] for r in ps_set["spec"]["replicatedJobs"]] == ["chief", "ps", "worker"]
    assert ps_set["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["chief"]}
    assert "successPolicy" not in mwms_set["spec"]  # JobSet's default: every job completes
    assert ps_set["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": ps_set["metadata"]["name"]}


def test_k8s_index_refuses_a_pod_outside_the_plan(tmp_path):
    plan_json = tmp_path / "plan.json"
    plan_json.write_text(json.dumps(plan_in(k8s.jobset(PS, TARGET)[0]).to_dict()))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ROOT}
    for index, message in (("", "run this as an Indexed Job's pod"), ("2", "no task worker_2")):
        proc = subprocess.run([sys.executable, "-m", "cluster.k8s.index", str(plan_json), "worker", "true"],
                              capture_output=True, text=True, env=dict(env, JOB_COMPLETION_INDEX=index))
        assert proc.returncode == 2 and message in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "cluster.k8s.index", str(plan_json), "worker", "sh", "-c",
                           "echo $TF_CONFIG"], capture_output=True, text=True, env=dict(env, JOB_COMPLETION_INDEX="1"))
    assert proc.returncode == 0 and json.loads(proc.stdout)["task"] == {"type": "worker", "index": 1}


def test_cli_writes_valid_manifests_for_a_default_run_id(tmp_path):
    proc = run_cli("--strategy=parameter_server", "--num_workers=2", "--cores_per_worker=4",
                   "--image=registry.example/tfbench:1", "--pvc=tfbench-runs", f"--out_dir={tmp_path}",
                   module="cluster.k8s", timeout=60)
    assert proc.returncode == 0, proc.stderr
    for name in ("jobset.yaml", "tfjob.yaml", "indexed-jobs.yaml"):
        documents = list(yaml.safe_load_all((tmp_path / name).read_text()))
        assert documents[0]["kind"] == "ConfigMap" and f"wrote {tmp_path / name}" in proc.stdout
        for obj in documents:
            assert rejected(obj) == [], (name, obj["kind"])
    refused = run_cli("--strategy=horovod", "--num_workers=2", f"--out_dir={tmp_path}", module="cluster.k8s")
    assert refused.returncode == 2 and "MPIJob" in refused.stderr
    for flag in ("--namespace=Bench", "--pvc=runs_rwx"):
        bad = run_cli("--strategy=multi_worker_mirrored", "--num_workers=2", flag, f"--out_dir={tmp_path}/bad",
                      module="cluster.k8s")
        assert bad.returncode == 2 and flag.split("=")[0] in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "bad").exists()


WHAT_A_RANK_SEES = """
import json, os, socket, sys
env = {k: v for k, v in os.environ.items() if k.startswith("HOROVOD_")}
if env.get("HOROVOD_RANK") == "0":  # rank 0's pod serves the rendezvous while its task runs
    socket.create_connection((env["HOROVOD_GLOO_RENDEZVOUS_ADDR"], int(env["HOROVOD_GLOO_RENDEZVOUS_PORT"])), 5).close()
print(json.dumps(env))
"""


def test_the_ranks_wrapper_serves_the_rendezvous_from_rank_0s_pod_and_gives_each_rank_its_environment(tmp_path):
    pytest.importorskip("horovod")
    hosts = {"worker_0": "localhost", "worker_1": "127.0.0.1"}  # two names of this machine: two pods' DNS names
    plan = k8s._plan(HYBRID, lambda role, index: hosts.get(f"{role}_{index}", "127.0.0.2"))
    plan_file, run_dir = tmp_path / "plan.json", tmp_path / "run"
    plan_file.write_text(json.dumps(plan.to_dict()))

    def pod(name):
        env = {"TF_CONFIG": json.dumps(plan.task(name).tf_config), "PYTHONPATH": ROOT}
        return subprocess.Popen([sys.executable, "-m", "cluster.k8s.rendezvous", str(plan_file), sys.executable, "-c",
                                 WHAT_A_RANK_SEES, "--run_dir", str(run_dir)], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    started = {name: pod(name) for name in ("worker_1", "ps_0", "worker_0")}  # rank 1 waits for rank 0's port
    seen = {}
    for name, proc in started.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        seen[name] = json.loads(out)
    port = json.loads((run_dir / "tasks" / "horovod-rendezvous.json").read_text())["port"]
    assert seen["ps_0"] == {}
    for rank, name in enumerate(("worker_0", "worker_1")):
        assert seen[name]["HOROVOD_RANK"] == str(rank) and seen[name]["HOROVOD_SIZE"] == "2"
        assert seen[name]["HOROVOD_HOSTNAME"] == hosts[name] and seen[name]["HOROVOD_LOCAL_SIZE"] == "1"
        assert (seen[name]["HOROVOD_GLOO_RENDEZVOUS_ADDR"], seen[name]["HOROVOD_GLOO_RENDEZVOUS_PORT"]) == (
            "localhost", str(port))
    deadline = __import__("time").monotonic() + 10  # the rendezvous ends with rank 0's task
    while __import__("time").monotonic() < deadline:
        try:
            __import__("socket").create_connection(("localhost", port), 1).close()
        except OSError:
            break
        __import__("time").sleep(0.2)
    else:
        pytest.fail(f"the rendezvous still listens on port {port} after rank 0's task ended")
