"""tfbench's image under podman, for tests/test_image.py: the image built once (make image's own
script), a container run of it, and the pods of a JobSet started as podman containers.

A JobSet's pods run here as its controllers would start them: each replicated job's Indexed Job
gives pod i of role r the hostname <jobset>-<r>-0-<i>, the environment variable
JOB_COMPLETION_INDEX=i and the DNS name <hostname>.<subdomain>.<namespace>.svc(.cluster.local)
through JobSet's headless Service; everything else comes from the manifest itself: the pod's
command, environment, working directory, CPU limit, and its volumes (the ConfigMap's files, and
the ReadWriteMany claim as one directory all pods share). All pods join one podman network, on
which each is reachable under its DNS name (a network alias), as on a cluster's pod network.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
import uuid
from typing import Dict, List, Optional

from conftest import ROOT

IMAGE = "tfbench:latest"  # make image's tag: the tests build the image make image builds
CONTAINERS_CONF = os.path.join(ROOT, "tools", "scripts", "containers.conf")
LABEL = "tfbench-test"  # every container and network a test makes carries it


def env() -> Dict[str, str]:
    return dict(os.environ, CONTAINERS_CONF=os.environ.get("CONTAINERS_CONF", CONTAINERS_CONF))


def podman(*args, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=env())
    if check and proc.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args[:3])} ...: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc


def unavailable_reason() -> str:
    """'' when podman can build and run containers here; else why not (the tests skip with it)."""
    if os.geteuid() != 0:
        return "the container tests install podman and run it rootful, which needs root"
    proc = subprocess.run(["bash", os.path.join(ROOT, "tools", "scripts", "install_podman.sh")], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        return f"tools/scripts/install_podman.sh failed: {proc.stderr.strip()[-300:]}"
    info = subprocess.run(["podman", "info"], capture_output=True, text=True, env=env())
    if info.returncode != 0:
        return f"podman cannot run here: {info.stderr.strip()[-300:]}"
    return ""


def build_image() -> float:
    """`make image`'s script, with its defaults; returns the seconds it took."""
    started = time.monotonic()
    proc = subprocess.run(["bash", os.path.join(ROOT, "tools", "scripts", "build_image.sh")], cwd=ROOT,
                          capture_output=True, text=True, timeout=3600, env=dict(env(), IMAGE=IMAGE))
    if proc.returncode != 0:
        raise RuntimeError(f"make image failed: {proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return time.monotonic() - started


def leftovers() -> List[str]:
    """Containers and networks of the tests that still exist."""
    containers = podman("ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}").stdout.split()
    networks = podman("network", "ls", "--filter", f"label={LABEL}", "--format", "{{.Name}}").stdout.split()
    return [f"container {c}" for c in containers] + [f"network {n}" for n in networks]


@dataclasses.dataclass
class Pod:
    name: str  # the pod's hostname, and the container's name here
    role: str  # the replicated job
    index: int  # JOB_COMPLETION_INDEX
    dns: str  # <hostname>.<subdomain>.<namespace>.svc
    run_args: List[str]  # podman run's options and the image
    command: List[str]


def config_map_files(objects: List[dict], directory: str) -> Dict[str, str]:
    """Writes each ConfigMap's files into directory/<its name>/; {ConfigMap name: that folder}."""
    found = {}
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            folder = os.path.join(directory, obj["metadata"]["name"])
            os.makedirs(folder)
            for name, text in obj["data"].items():
                with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                    f.write(text)
            found[obj["metadata"]["name"]] = folder
    return found


def jobset_pods(objects: List[dict], config_maps: Dict[str, str], claim_dir: str, network: str) -> List[Pod]:
    """The pods the JobSet in `objects` asks for, as podman containers on `network`."""
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    name, namespace = jobset["metadata"]["name"], jobset["metadata"].get("namespace", "default")
    subdomain = (jobset["spec"].get("network") or {}).get("subdomain") or name
    pods = []
    for replicated in jobset["spec"]["replicatedJobs"]:
        for job_index in range(replicated.get("replicas", 1)):
            job = replicated["template"]["spec"]
            for index in range(job.get("completions", 1)):
                hostname = f"{name}-{replicated['name']}-{job_index}-{index}"
                dns = f"{hostname}.{subdomain}.{namespace}.svc"
                pod = job["template"]["spec"]
                (container,) = pod["containers"]
                args = ["--name", hostname, "--hostname", hostname, "--label", LABEL, "--network", network,
                        "--network-alias", dns, "--network-alias", f"{dns}.cluster.local",
                        "--env", f"JOB_COMPLETION_INDEX={index}"]
                for var in container.get("env", []):
                    args += ["--env", f"{var['name']}={var['value']}"]
                if container.get("workingDir"):
                    args += ["--workdir", container["workingDir"]]
                cpus = ((container.get("resources") or {}).get("limits") or {}).get("cpu")
                args += ["--cpus", str(cpus)] if cpus else []
                volumes = {v["name"]: v for v in pod.get("volumes", [])}
                for mount in container.get("volumeMounts", []):
                    volume = volumes[mount["name"]]
                    source = config_maps[volume["configMap"]["name"]] if "configMap" in volume else claim_dir
                    args += ["--volume", f"{source}:{mount['mountPath']}" + (":ro" if "configMap" in volume else "")]
                pods.append(Pod(hostname, replicated["name"], index, dns, args + [container["image"]],
                                list(container.get("command", [])) + list(container.get("args", []))))
    return pods


class PodNetwork:
    """One podman network and the containers started on it; close() removes them all."""

    def __init__(self):
        self.name = f"tfbench-test-{uuid.uuid4().hex[:8]}"
        self.containers: List[str] = []
        podman("network", "create", "--label", LABEL, self.name)

    def start(self, pod: Pod) -> None:
        podman("run", "--detach", *pod.run_args, *pod.command)
        self.containers.append(pod.name)

    def exit_code(self, container: str) -> Optional[int]:
        """The container's exit code once it has stopped, else None."""
        state = json.loads(podman("inspect", "--format", "{{json .State}}", container).stdout)
        return None if state["Running"] or state["Status"] in ("created", "configured") else state["ExitCode"]

    def wait(self, containers: List[str], timeout: float) -> Dict[str, int]:
        """Exit codes of `containers` once all have stopped (TimeoutError after `timeout`)."""
        end, codes = time.monotonic() + timeout, {}
        while time.monotonic() < end:
            codes = {c: self.exit_code(c) for c in containers}
            if all(code is not None for code in codes.values()):
                return codes
            time.sleep(1.0)
        raise TimeoutError(f"still running after {timeout:g} s: {[c for c, code in codes.items() if code is None]}")

    def logs(self, container: str) -> str:
        proc = podman("logs", container, check=False)
        return proc.stdout[-2500:] + proc.stderr[-2500:]

    def stop(self, containers: List[str]) -> None:
        """What a JobSet that has succeeded does with the pods still serving: SIGTERM, then SIGKILL."""
        if containers:
            podman("stop", "--time", "10", *containers, timeout=60)

    def close(self) -> None:
        if self.containers:
            podman("rm", "--force", "--time", "5", *self.containers, timeout=120, check=False)
        podman("network", "rm", "--force", self.name, check=False)
