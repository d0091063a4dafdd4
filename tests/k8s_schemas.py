"""Offline checks of Kubernetes objects, as a cluster would make them on `kubectl apply`.

Two parts: each object against its kind's published schema (tests/data/k8s-schemas, whose
README names sources and versions), strictly as kubectl validates by default (an unknown field
is an error); and the names, which no schema checks: the API server's rules for each kind
(apimachinery's IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label, label values, port names),
the names the Job controller, the JobSet webhook (v0.12.0, pkg/webhooks/jobset_webhook.go) and the
TFJob webhook (training-operator v1.9.0, pkg/webhooks/tensorflow/tfjob_webhook.go) derive from
them.
"""
import json
import os
import re
from typing import Dict, Iterator, List, Tuple

import jsonschema

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "k8s-schemas")
KINDS = {("v1", "ConfigMap"): "configmap.json", ("v1", "Service"): "service.json", ("batch/v1", "Job"): "job.json",
         ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobset.json", ("kubeflow.org/v1", "TFJob"): "tfjob.json"}
MAX_LABEL = 63
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_IANA_SVC_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
POD_SUFFIX = "-abcde"  # the 5 random characters the Job controller appends to a pod's name


def dns1123_label(name: str) -> bool:
    return len(name) <= MAX_LABEL and bool(_DNS1123_LABEL.fullmatch(name))


def dns1035_label(name: str) -> bool:
    return len(name) <= MAX_LABEL and bool(_DNS1035_LABEL.fullmatch(name))


def dns1123_subdomain(name: str) -> bool:
    return len(name) <= 253 and all(dns1123_label(part) for part in name.split("."))


def label_value(value: str) -> bool:
    return len(value) <= MAX_LABEL and bool(_LABEL_VALUE.fullmatch(value))


def label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return (not prefix or dns1123_subdomain(prefix)) and label_value(name) and bool(name)


def port_name(name: str) -> bool:
    """IANA service name: at most 15, lower-case letters, digits and '-', at least one letter, no '--'."""
    return (len(name) <= 15 and bool(_IANA_SVC_NAME.fullmatch(name)) and "--" not in name
            and any(c.isalpha() for c in name))


def schema_errors(obj: dict) -> List[str]:
    """What the kind's schema rejects in `obj` (apiVersion and kind pick the schema)."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key not in KINDS:
        return [f"no schema for {key}"]
    with open(os.path.join(SCHEMAS, KINDS[key]), encoding="utf-8") as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)]


def pod_templates(obj: dict) -> Iterator[Tuple[str, dict]]:
    """(where, pod template spec) of every pod the object makes."""
    kind, spec = obj["kind"], obj.get("spec", {})
    if kind == "Job":
        yield obj["metadata"]["name"], spec["template"]
    elif kind == "JobSet":
        for rjob in spec["replicatedJobs"]:
            yield rjob["name"], rjob["template"]["spec"]["template"]
    elif kind == "TFJob":
        for rtype, replica in spec["tfReplicaSpecs"].items():
            yield rtype, replica["template"]


def _labels(where: str, labels: Dict[str, str]) -> List[str]:
    return [f"{where}: label {k}={v!r}" for k, v in (labels or {}).items() if not (label_key(k) and label_value(v))]


def _pod_names(where: str, template: dict) -> List[str]:
    spec, errors = template["spec"], _labels(where, (template.get("metadata") or {}).get("labels"))
    for container in spec.get("containers", []):
        errors += [f"{where}: container name {container['name']!r}"] * (not dns1123_label(container["name"]))
        errors += [f"{where}: port name {p['name']!r}" for p in container.get("ports", [])
                   if "name" in p and not port_name(p["name"])]
    errors += [f"{where}: volume name {v['name']!r}" for v in spec.get("volumes", []) if not dns1123_label(v["name"])]
    if "subdomain" in spec and not dns1123_label(spec["subdomain"]):
        errors.append(f"{where}: subdomain {spec['subdomain']!r}")
    return errors


def _indexed_pods(job_name: str, completions: int) -> List[str]:
    """An Indexed Job's last pod: hostname <job>-<index> (a DNS-1123 label), name + 5 random."""
    host = f"{job_name}-{completions - 1}"
    return ([f"pod hostname {host!r}"] * (not dns1123_label(host))
            + [f"pod name {host + POD_SUFFIX!r}"] * (not dns1123_subdomain(host + POD_SUFFIX)))


def name_errors(obj: dict) -> List[str]:
    """What the API server, the Job controller or the kind's webhook would refuse in the names."""
    meta, kind, spec = obj["metadata"], obj["kind"], obj.get("spec", {})
    name, errors = meta["name"], []
    if not dns1123_label(meta.get("namespace", "default")):
        errors.append(f"namespace {meta.get('namespace')!r}")
    errors += _labels(kind, meta.get("labels"))
    if kind == "ConfigMap" and not dns1123_subdomain(name):
        errors.append(f"ConfigMap name {name!r} is not a DNS-1123 subdomain")
    if kind == "Service":
        errors += [f"Service name {name!r} is not a DNS-1035 label"] * (not dns1035_label(name))
        errors += _labels("selector", spec.get("selector"))
        errors += [f"Service port name {p['name']!r}" for p in spec.get("ports", []) if not port_name(p["name"])]
    if kind == "Job":  # the controller labels pods job-name=<name>: a label value
        errors += [f"Job name {name!r} is not a DNS-1123 label"] * (not (dns1123_subdomain(name) and label_value(name)))
        if spec.get("completionMode") == "Indexed":
            errors += _indexed_pods(name, spec["completions"])
    if kind == "JobSet":
        errors += [f"JobSet name {name!r} is not a DNS-1035 label"] * (not dns1035_label(name))
        subdomain = spec.get("network", {}).get("subdomain") or name
        errors += [f"subdomain {subdomain!r} is not a DNS-1035 label"] * (not dns1035_label(subdomain))
        for rjob in spec["replicatedJobs"]:
            job = f"{name}-{rjob['name']}-{rjob['replicas'] - 1}"  # GenJobName: <jobset>-<rjob>-<job index>
            errors += [f"JobSet job name {job!r} is not a DNS-1035 label"] * (not dns1035_label(job))
            job_spec = rjob["template"]["spec"]
            if job_spec.get("completionMode") == "Indexed":
                pod = f"{job}-{job_spec['completions'] - 1}{POD_SUFFIX}"  # GenPodName + 5 random
                errors += [f"JobSet pod name {pod!r} is not a DNS-1035 label"] * (not dns1035_label(pod))
        targets = spec.get("successPolicy", {}).get("targetReplicatedJobs", [])
        known = {r["name"] for r in spec["replicatedJobs"]}
        errors += [f"successPolicy names unknown replicated job {t!r}" for t in targets if t not in known]
    if kind == "TFJob":
        errors += [f"TFJob name {name!r} is not a DNS-1035 label"] * (not dns1035_label(name))
        for rtype, replica in spec["tfReplicaSpecs"].items():  # pods and Services <name>-<type>-<index>
            pod = f"{name}-{rtype.lower()}-{replica['replicas'] - 1}"
            errors += [f"TFJob replica name {pod!r} is not a DNS-1035 label"] * (not dns1035_label(pod))
    for where, template in pod_templates(obj):
        errors += _pod_names(f"{kind} {where}", template)
    return errors


def rejected(obj: dict) -> List[str]:
    """Everything a cluster would refuse in `obj`: schema first, then names."""
    return schema_errors(obj) + name_errors(obj)
