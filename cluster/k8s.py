"""`python -m cluster.k8s <tfbench flags> --out_dir=DIR`: Kubernetes manifests for a run's cluster.

Two alternatives for the same topology, each a self-contained YAML file:
- tfjob.yaml: a Kubeflow TFJob (kubeflow.org/v1) with Chief / PS / Worker replica specs (tfbench
  runs no evaluator); the training operator sets each pod's TF_CONFIG and tasks read it with
  TFConfigClusterResolver (`python -m tfbench.task --task tf_config`).
- indexed-job.yaml: for clusters without Kubeflow (its newer trainer dropped TensorFlow): an
  Indexed Job plus a headless Service; pod i is the plan's task i, reachable as
  <job>-<i>.<service>, and cluster.k8s_index builds its TF_CONFIG from JOB_COMPLETION_INDEX.
Both carry the run's config.json and plan.json in a ConfigMap; the run directory is a
ReadWriteMany PersistentVolumeClaim (--pvc) mounted at /runs in every pod, so task records
merge as usual: `python -m cluster.merge --run_dir /runs/<run_id>` in any pod mounting it.
Servers listen on port 2222. CPU requests and limits come from the cores per task.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, List

import yaml
from absl import app, flags

import tfbench.config as config_lib
from cluster.spec import ClusterPlan, TaskSpec
from cluster.topology import make_plan, retarget
from tfbench.config import RunConfig
from tfbench.config import flags as tfbench_flags
from tfbench.config import helptext
from tfbench.config.errors import ConfigError

flags.DEFINE_string("out_dir", "k8s", "Directory the manifests are written to.")
flags.DEFINE_string("image", "tfbench:latest", "Container image with tfbench at --workdir and its requirements.")
flags.DEFINE_string("workdir", "/tfbench", "Where tfbench is inside the image.")
flags.DEFINE_string("namespace", "default", "Kubernetes namespace.")
flags.DEFINE_string("pvc", "tfbench-runs", "ReadWriteMany PersistentVolumeClaim holding the run directories.")

PORT = 2222
RUNS = "/runs"
CONFIG_MOUNT = "/etc/tfbench"
REPLICA_TYPES = {"chief": "Chief", "ps": "PS", "worker": "Worker"}


@dataclasses.dataclass(frozen=True)
class Target:
    image: str
    workdir: str
    namespace: str
    pvc: str


def k8s_name(run_id: str) -> str:
    """A DNS-1123 label from the run id, short enough for <name>-<type>-<index> pod names."""
    name = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")
    return (name[-40:].strip("-") or "tfbench")


def cpus_of(config: RunConfig, task: TaskSpec) -> int:
    """Cores per task: --cores_per_worker (x local devices) for workers, 1 for light tasks."""
    if task.role == "worker":
        return max(1, config.cores_per_worker) * max(1, config.effective_num_local_devices)
    return 1


def tfjob_host(name: str, namespace: str, role: str, index: int) -> str:
    """The training operator's service name for a replica: <job>-<type>-<index>.<namespace>.svc."""
    return f"{name}-{role}-{index}.{namespace}.svc"


def indexed_host(name: str, namespace: str, index: int) -> str:
    """An Indexed Job pod's DNS name through the headless Service named like the Job."""
    return f"{name}-{index}.{name}.{namespace}.svc"


def _config_map(name: str, target: Target, config: RunConfig, plan: ClusterPlan) -> dict:
    import json

    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-run", "namespace": target.namespace},
            "data": {"config.json": json.dumps(config.to_dict(), sort_keys=True),
                     "plan.json": json.dumps(plan.to_dict(), sort_keys=True)}}


def _container(config: RunConfig, target: Target, cpus: int, entry: List[str]) -> dict:
    run_dir = f"{RUNS}/{config.run_id}"
    prepare = (f"mkdir -p {run_dir}/tasks {run_dir}/tb && cp -n {CONFIG_MOUNT}/config.json "
               f"{CONFIG_MOUNT}/plan.json {run_dir}/")
    return {
        "name": "tensorflow",
        "image": target.image,
        "workingDir": target.workdir,
        "command": ["sh", "-c", f"{prepare} && exec " + " ".join(entry + ["--run_dir", run_dir])],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "PYTHONPATH", "value": target.workdir}],
        "ports": [{"name": "tfjob-port", "containerPort": PORT}],
        "resources": {"requests": {"cpu": str(cpus)}, "limits": {"cpu": str(cpus)}},
        "volumeMounts": [{"name": "runs", "mountPath": RUNS}, {"name": "run-config", "mountPath": CONFIG_MOUNT}],
    }


def _volumes(name: str, target: Target) -> List[dict]:
    return [{"name": "runs", "persistentVolumeClaim": {"claimName": target.pvc}},
            {"name": "run-config", "configMap": {"name": f"{name}-run"}}]


def tfjob(config: RunConfig, target: Target) -> List[dict]:
    """ConfigMap + TFJob; the operator's own TF_CONFIG names the same tasks as the plan."""
    name = k8s_name(config.run_id)
    base = make_plan(config.replace(hosts=("pod",)))
    plan = retarget(base, {t.name: (tfjob_host(name, target.namespace, t.role, t.index), PORT) for t in base.tasks})
    specs: Dict[str, dict] = {}
    for task in plan.tasks:
        kind = REPLICA_TYPES[task.role]
        if kind in specs:
            specs[kind]["replicas"] += 1
            continue
        entry = ["python", "-m", "tfbench.task", "--task", "tf_config"]
        specs[kind] = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {
            "containers": [_container(config, target, cpus_of(config, task), entry)],
            "volumes": _volumes(name, target)}}}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
           "metadata": {"name": name, "namespace": target.namespace},
           "spec": {"runPolicy": {"cleanPodPolicy": "Running"}, "tfReplicaSpecs": specs}}
    return [_config_map(name, target, config, plan), job]


def indexed_job(config: RunConfig, target: Target) -> List[dict]:
    """ConfigMap + headless Service + Indexed Job (pod i runs the plan's task i)."""
    name = k8s_name(config.run_id)
    base = make_plan(config.replace(hosts=("pod",)))
    plan = retarget(base, {t.name: (indexed_host(name, target.namespace, i), PORT) for i, t in enumerate(base.tasks)})
    n = len(plan.tasks)
    entry = ["python", "-m", "cluster.k8s_index", f"{CONFIG_MOUNT}/plan.json", "python", "-m", "tfbench.task",
             "--task", "tf_config"]
    cpus = max(cpus_of(config, t) for t in plan.tasks)
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": target.namespace},
               "spec": {"clusterIP": "None", "selector": {"job-name": name},
                        "ports": [{"name": "grpc", "port": PORT}]}}
    spec = {"completionMode": "Indexed", "completions": n, "parallelism": n, "backoffLimit": 0,
            "template": {"metadata": {"labels": {"job-name": name}}, "spec": {
                "subdomain": name, "restartPolicy": "Never",
                "containers": [_container(config, target, cpus, entry)], "volumes": _volumes(name, target)}}}
    finishing = [i for i, t in enumerate(plan.tasks) if not t.service]
    if len(finishing) < n:  # ps and workers serve until stopped: the Job succeeds with the chief
        spec["successPolicy"] = {"rules": [{"succeededIndexes": ",".join(map(str, finishing))}]}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": target.namespace},
           "spec": spec}
    return [_config_map(name, target, config, plan), service, job]


def write(out_dir: str, config: RunConfig, target: Target) -> Dict[str, str]:
    os.makedirs(out_dir, exist_ok=True)
    written = {}
    for file_name, documents in (("tfjob.yaml", tfjob(config, target)),
                                 ("indexed-job.yaml", indexed_job(config, target))):
        path = os.path.join(out_dir, file_name)
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump_all(documents, f, sort_keys=False)
        written[file_name] = path
    return written


def main(argv) -> int:
    if len(argv) > 1:
        helptext.fail_usage(f"unexpected arguments: {' '.join(argv[1:])}")
    fv = flags.FLAGS
    try:
        config = config_lib.validate(tfbench_flags.config_from_flags(), by_hand=True, engine_nodes=True)
        if config.strategy == "horovod":
            raise ConfigError("cluster.k8s writes TensorFlow clusters; for --strategy=horovod use an MPIJob")
        if not config.run_id:
            from tfbench.results.rundir import default_run_id

            config = config.replace(run_id=default_run_id(config.model, config.strategy, config.num_workers))
        config = config.replace(logdir=RUNS)
    except ConfigError as e:
        helptext.fail_usage(str(e))
    written = write(fv.out_dir, config, Target(fv.image, fv.workdir, fv.namespace, fv.pvc))
    for path in written.values():
        print(f"tfbench: wrote {path}")
    print(f"kubectl apply -f {written['tfjob.yaml']}   # or, without Kubeflow: {written['indexed-job.yaml']}")
    print(f"then, in a pod mounting {fv.pvc}: python -m cluster.merge --run_dir {RUNS}/{config.run_id}")
    return 0


def help_groups():
    return helptext.names_of(tfbench_flags.GROUPS) + [("Manifests", ["out_dir", "image", "workdir", "namespace", "pvc"])]


if __name__ == "__main__":
    app.run(main, flags_parser=helptext.parser(__doc__, help_groups, "cluster.k8s", tfbench_flags.define_flags))
