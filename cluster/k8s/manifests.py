"""Kubernetes objects for a run's cluster: a JobSet, a TFJob, or plain Indexed Jobs.

One topology, three ways to run it (each a list of objects, written to a file by cluster.k8s):
- JobSet (jobset.x-k8s.io/v1alpha2, kubernetes-sigs/jobset): one replicated job per role, each an
  Indexed Job of that role's tasks with that role's CPUs; pod i of role r is r's task i, reachable
  as <jobset>-<r>-0-<i>.<jobset> (JobSet's own headless Service); for parameter servers the
  JobSet succeeds when the roles that finish do (the chief, or the hybrid's workers: ps serve until
  stopped, as do a coordinator's workers).
- TFJob (kubeflow.org/v1): for clusters still running Kubeflow's v1 Training Operator, which sets
  each pod's TF_CONFIG itself; pods are <tfjob>-<type>-<i>.
- Plain Indexed Jobs (batch/v1), one per role, and a headless Service: nothing to install; pods
  are <name>-<role>-<i>.<name>.
In JobSet and plain Jobs, cluster.k8s.index builds TF_CONFIG from the role and the pod's
JOB_COMPLETION_INDEX. Workers that are also Horovod ranks (the hybrid) start through
cluster.k8s.rendezvous, which serves their rendezvous from rank 0's pod; Horovod's host list names one
rank per pod. Every variant carries config.json and plan.json in a ConfigMap and mounts
the run directory from a ReadWriteMany claim at /runs. Names are DNS-1035 labels whatever the run
id (k8s_name), short enough for the pod names each controller derives from them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shlex
from typing import Dict, List

from cluster.plan.spec import ClusterPlan, TaskSpec
from cluster.plan.topology import make_plan, retarget
from tfbench.config import RunConfig
from tfbench.config.errors import ConfigError

PORT = 2222
RUNS = "/runs"
CONFIG_MOUNT = "/etc/tfbench"
REPLICA_TYPES = {"chief": "Chief", "ps": "PS", "worker": "Worker"}
ROLES = ("chief", "ps", "worker")  # the plan's order; JobSet's replicated jobs follow it
# A JobSet's pods are named <name>-<role>-<job index>-<pod index>-<5 random> and must stay a
# DNS-1035 label (<= 63): 40 + len("-worker-0-") + 6 leaves 7 digits of pod index.
NAME_MAX = 40
RUN_LABEL = "tfbench/run"


@dataclasses.dataclass(frozen=True)
class Target:
    image: str
    workdir: str
    namespace: str
    pvc: str


_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def check_target(target: Target) -> None:
    """Refuses what the API server would: a namespace that is no DNS-1123 label, a claim name that
    is no DNS-1123 subdomain, an empty image, a relative working directory."""
    if not _DNS1123_LABEL.fullmatch(target.namespace):
        raise ConfigError(f"--namespace={target.namespace!r} must be a DNS-1123 label (lower-case letters, digits, "
                          "'-', at most 63)")
    if len(target.pvc) > 253 or not all(_DNS1123_LABEL.fullmatch(p) for p in target.pvc.split(".")):
        raise ConfigError(f"--pvc={target.pvc!r} must be a DNS-1123 subdomain (lower-case letters, digits, '-', '.')")
    if not target.image.strip():
        raise ConfigError("--image must name the container image holding tfbench")
    if not target.workdir.startswith("/"):
        raise ConfigError(f"--workdir={target.workdir!r} must be an absolute path inside the image")


def k8s_name(run_id: str) -> str:
    """A DNS-1035 label (a letter first, then lower-case letters, digits and '-') of at most
    NAME_MAX characters naming the run's objects. A run id that does not map onto one as it is
    keeps its head (the default run id's date and time) and gets 6 hex digits of its hash, so
    that run ids differing only in case, punctuation or tail still name different objects."""
    slug = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-")
    if slug == run_id and len(slug) <= NAME_MAX and slug[:1].isalpha():
        return slug
    slug = slug if slug[:1].isalpha() else f"tfb-{slug}".rstrip("-")
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:6]
    return f"{slug[:NAME_MAX - 7].rstrip('-')}-{digest}"


def cpus_of(config: RunConfig, task: TaskSpec) -> int:
    """Cores per task: --cores_per_worker (x local devices) for workers, 1 for light tasks."""
    if task.role == "worker":
        return max(1, config.cores_per_worker) * max(1, config.effective_num_local_devices)
    return 1


def tfjob_host(name: str, namespace: str, role: str, index: int) -> str:
    """The training operator's Service for a replica: <job>-<type>-<index>.<namespace>.svc."""
    return f"{name}-{role}-{index}.{namespace}.svc"


def jobset_host(name: str, namespace: str, role: str, index: int) -> str:
    """A JobSet pod's DNS name: <jobset>-<replicated job>-<job index>-<pod index>.<subdomain>."""
    return f"{name}-{role}-0-{index}.{name}.{namespace}.svc"


def job_host(name: str, namespace: str, role: str, index: int) -> str:
    """A pod of the plain Indexed Job <name>-<role>, through the headless Service <name>."""
    return f"{name}-{role}-{index}.{name}.{namespace}.svc"


def _plan(config: RunConfig, host) -> ClusterPlan:
    """The plan with every task at its pod's DNS name; launcher ranks one per pod in Horovod's host list."""
    base = make_plan(config.replace(hosts=("pod",)))
    plan = retarget(base, {t.name: (host(t.role, t.index), PORT) for t in base.tasks})
    if plan.ranked_tasks:
        plan = dataclasses.replace(plan, horovod_hosts=",".join(f"{t.host}:1" for t in plan.ranked_tasks))
    return plan


def _roles(plan: ClusterPlan) -> Dict[str, List[TaskSpec]]:
    found: Dict[str, List[TaskSpec]] = {}
    for task in sorted(plan.tasks, key=lambda t: (ROLES.index(t.role), t.index)):
        found.setdefault(task.role, []).append(task)
    return found


def _config_map(name: str, target: Target, config: RunConfig, plan: ClusterPlan) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-run", "namespace": target.namespace},
            "data": {"config.json": json.dumps(config.to_dict(), sort_keys=True),
                     "plan.json": json.dumps(plan.to_dict(), sort_keys=True)}}


def _pod_spec(name: str, config: RunConfig, target: Target, cpus: int, entry: List[str], port_name: str,
              own_restart_policy: bool = True) -> dict:
    """One container named tensorflow (the training operator looks for it) with the task's CPUs."""
    run_dir = f"{RUNS}/{config.run_id}"
    prepare = (f"mkdir -p {run_dir}/tasks {run_dir}/tb && cp -n {CONFIG_MOUNT}/config.json "
               f"{CONFIG_MOUNT}/plan.json {run_dir}/")
    container = {
        "name": "tensorflow",
        "image": target.image,
        "workingDir": target.workdir,
        "command": ["sh", "-c", f"{prepare} && exec " + shlex.join(entry + ["--run_dir", run_dir])],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "PYTHONPATH", "value": target.workdir}],
        "ports": [{"name": port_name, "containerPort": PORT}],
        "resources": {"requests": {"cpu": str(cpus)}, "limits": {"cpu": str(cpus)}},
        "volumeMounts": [{"name": "runs", "mountPath": RUNS}, {"name": "run-config", "mountPath": CONFIG_MOUNT}],
    }
    pod = {"containers": [container],
           "volumes": [{"name": "runs", "persistentVolumeClaim": {"claimName": target.pvc}},
                       {"name": "run-config", "configMap": {"name": f"{name}-run"}}]}
    return {"restartPolicy": "Never", **pod} if own_restart_policy else pod


def _task_entry(plan: ClusterPlan) -> List[str]:
    """The task, through cluster.k8s.rendezvous where workers are also Horovod ranks (their rendezvous)."""
    ranks = ["python", "-m", "cluster.k8s.rendezvous", f"{CONFIG_MOUNT}/plan.json"] if plan.ranked_tasks else []
    return ranks + ["python", "-m", "tfbench.task", "--task", "tf_config"]


def _indexed_entry(plan: ClusterPlan, role: str) -> List[str]:
    return ["python", "-m", "cluster.k8s.index", f"{CONFIG_MOUNT}/plan.json", role, *_task_entry(plan)]


def _job_spec(name: str, config: RunConfig, target: Target, plan: ClusterPlan, role: str,
              tasks: List[TaskSpec]) -> dict:
    """An Indexed Job of one role's tasks: pod i is the role's task i, with the role's CPUs."""
    n = len(tasks)
    pod = _pod_spec(name, config, target, cpus_of(config, tasks[0]), _indexed_entry(plan, role), "grpc")
    return {"completionMode": "Indexed", "completions": n, "parallelism": n, "backoffLimit": 0,
            "template": {"metadata": {"labels": {RUN_LABEL: name}}, "spec": pod}}


def _finishing_roles(plan: ClusterPlan) -> List[str]:
    """The roles whose tasks finish, when others serve until stopped (ps; a coordinator's
    workers); [] when every task finishes."""
    if not any(t.service for t in plan.tasks):
        return []
    return [role for role, tasks in _roles(plan).items() if not any(t.service for t in tasks)]


def jobset(config: RunConfig, target: Target) -> List[dict]:
    """ConfigMap + JobSet with one replicated job per role."""
    name = k8s_name(config.run_id)
    plan = _plan(config, lambda role, index: jobset_host(name, target.namespace, role, index))
    replicated = [{"name": role, "replicas": 1,
                   "template": {"spec": _job_spec(name, config, target, plan, role, tasks)}}
                  for role, tasks in _roles(plan).items()]
    spec = {"network": {"enableDNSHostnames": True, "subdomain": name}, "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": replicated}
    if _finishing_roles(plan):
        spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": _finishing_roles(plan)}
    job = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
           "metadata": {"name": name, "namespace": target.namespace}, "spec": spec}
    return [_config_map(name, target, config, plan), job]


def indexed_jobs(config: RunConfig, target: Target) -> List[dict]:
    """ConfigMap + headless Service + one Indexed Job per role."""
    name = k8s_name(config.run_id)
    plan = _plan(config, lambda role, index: job_host(name, target.namespace, role, index))
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": target.namespace},
               "spec": {"clusterIP": "None", "selector": {RUN_LABEL: name}, "publishNotReadyAddresses": True,
                        "ports": [{"name": "grpc", "port": PORT}]}}
    jobs = []
    for role, tasks in _roles(plan).items():
        spec = _job_spec(name, config, target, plan, role, tasks)
        spec["template"]["spec"]["subdomain"] = name
        jobs.append({"apiVersion": "batch/v1", "kind": "Job",
                     "metadata": {"name": f"{name}-{role}", "namespace": target.namespace,
                                  "labels": {RUN_LABEL: name}}, "spec": spec})
    return [_config_map(name, target, config, plan), service, *jobs]


def tfjob(config: RunConfig, target: Target) -> List[dict]:
    """ConfigMap + TFJob; the operator's own TF_CONFIG names the same tasks as the plan."""
    name = k8s_name(config.run_id)
    plan = _plan(config, lambda role, index: tfjob_host(name, target.namespace, role, index))
    entry = _task_entry(plan)
    specs = {}
    for role, tasks in _roles(plan).items():  # the replica spec's restartPolicy is the one the operator applies
        pod = _pod_spec(name, config, target, cpus_of(config, tasks[0]), entry, "tfjob-port", own_restart_policy=False)
        specs[REPLICA_TYPES[role]] = {"replicas": len(tasks), "restartPolicy": "Never", "template": {"spec": pod}}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name, "namespace": target.namespace},
           "spec": {"runPolicy": {"cleanPodPolicy": "Running"}, "tfReplicaSpecs": specs}}
    return [_config_map(name, target, config, plan), job]


MANIFESTS = {"jobset.yaml": jobset, "tfjob.yaml": tfjob, "indexed-jobs.yaml": indexed_jobs}
