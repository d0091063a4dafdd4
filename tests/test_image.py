"""The tfbench image (Containerfile, `make image`) under podman: a tiny 2-worker run inside one
container prints its table and records the image's commit; and the pods of the JobSet manifests
`python -m cluster.k8s` writes (multi_worker_mirrored with 2 workers; a parameter server with a
chief, 2 workers and 1 ps; the hybrid's recommender with 2 ranks and 1 ps, rank 0's pod serving
their rendezvous), started as podman containers on one network, each with its
manifest's command, environment and CPU limit under the DNS name JobSet gives it
(tests/podman_pods.py), run a cluster that finishes, and the merge the manifests name writes its
cluster record. The image is built once per session by make image's own script, which podman's
layers make quick while requirements.txt is unchanged. Skipped, with the reason, where podman
cannot run (not root)."""
import json
import os
import uuid

import podman_pods as pods
import pytest
import system_packages
import yaml

from clusters import DLRM
from conftest import TINY, run_cli
from tfrun import cluster_record, records

JOBSETS = {"mwms": [*TINY, "--strategy=multi_worker_mirrored", "--num_workers=2"],
           "ps": [*TINY, "--strategy=parameter_server", "--num_workers=2", "--num_ps=1"],
           "hybrid": [*DLRM, "--strategy=hybrid", "--num_workers=2", "--num_ps=1"]}


@pytest.fixture(scope="module")
def image(request):
    system_packages.podman(request)
    seconds = pods.build_image()
    print(f"make image: {seconds:.0f} s")
    yield pods.IMAGE
    left = pods.leftovers()
    assert not left, f"left behind by the container tests: {left}"


def write_jobset(tmp_path, flags, run_id, image_name):
    """`python -m cluster.k8s` as a user runs it: (the objects of jobset.yaml, its printed merge command)."""
    out = run_cli(*flags, f"--run_id={run_id}", f"--image={image_name}", f"--out_dir={tmp_path / 'k8s'}",
                  module="cluster.k8s", timeout=120)
    assert out.returncode == 0, out.stderr
    (merge,) = [line.split(": ", 1)[1] for line in out.stdout.splitlines() if "python -m cluster.merge" in line]
    with open(tmp_path / "k8s" / "jobset.yaml", encoding="utf-8") as f:
        return list(yaml.safe_load_all(f)), merge.split()


@pytest.mark.parametrize("name", sorted(JOBSETS))
def test_every_address_of_the_plan_is_a_jobset_pods_dns_name_at_its_port(tmp_path, name):
    objects, _ = write_jobset(tmp_path, JOBSETS[name], f"addr-{name}", "tfbench:latest")
    config_maps = pods.config_map_files(objects, str(tmp_path / "configmaps"))
    started = {(p.role, p.index): p for p in pods.jobset_pods(objects, config_maps, str(tmp_path), "net")}
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    ports = {p["containerPort"] for r in jobset["spec"]["replicatedJobs"]
             for p in r["template"]["spec"]["template"]["spec"]["containers"][0]["ports"]}
    tasks = json.loads(config_map["data"]["plan.json"])["tasks"]
    assert sorted(started) == sorted((t["role"], t["index"]) for t in tasks)
    for task in tasks:
        assert (task["host"], task["port"]) == (started[task["role"], task["index"]].dns, *ports)


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.container
@pytest.mark.parametrize("strategy", ["multi_worker_mirrored", "horovod"])
def test_the_image_runs_a_two_worker_cluster_and_prints_its_table(image, tmp_path, strategy):
    name = f"tfbench-test-{uuid.uuid4().hex[:8]}"
    runs = tmp_path / "runs"
    runs.mkdir()
    try:
        proc = pods.podman("run", "--name", name, "--label", pods.LABEL, "--volume", f"{runs}:/runs", image,
                           "tfbench", *TINY, f"--strategy={strategy}", "--num_workers=2", "--logdir=/runs",
                           "--run_id=in-image", timeout=300, check=False)
    finally:
        pods.podman("rm", "--force", name, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"strategy={strategy}  workers=2" in proc.stdout
    assert any(line.startswith("cluster ") for line in proc.stdout.splitlines()), proc.stdout
    assert "cluster images/sec = " in proc.stdout
    run_dir = str(runs / "in-image")
    assert cluster_record(run_dir)["status"] == "ok"
    environment = json.load(open(os.path.join(run_dir, "environment.json")))
    labels = json.loads(pods.podman("image", "inspect", "--format", "{{json .Labels}}", image).stdout)
    assert environment["tfbench_commit"] == labels["org.opencontainers.image.revision"]


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.container
@pytest.mark.parametrize("name", sorted(JOBSETS))
def test_jobset_pods_on_one_podman_network_run_the_cluster_and_merge_its_record(image, tmp_path, name):
    run_id = f"k8s-{name}-{uuid.uuid4().hex[:6]}"
    objects, merge = write_jobset(tmp_path, JOBSETS[name], run_id, image)
    claim = tmp_path / "claim"  # the ReadWriteMany claim every pod mounts
    claim.mkdir()
    config_maps = pods.config_map_files(objects, str(tmp_path / "configmaps"))
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    network = pods.PodNetwork()
    merge_name = f"{run_id}-merge"
    try:
        started = pods.jobset_pods(objects, config_maps, str(claim), network.name)
        for pod in started:
            network.start(pod)
        # the JobSet succeeds when the replicated jobs of its success policy have (else all of them)
        targets = (jobset["spec"].get("successPolicy") or {}).get("targetReplicatedJobs")
        finishing = [p.name for p in started if not targets or p.role in targets]
        codes = network.wait(finishing, timeout=300)
        failed = {c: code for c, code in codes.items() if code != 0}
        assert not failed, "\n".join(f"{c} exited {code}:\n{network.logs(c)}" for c, code in failed.items())
        serving = [p.name for p in started if p.name not in finishing]
        network.stop(serving)  # as the JobSet ends the pods still serving once it has succeeded
        merged = pods.podman("run", "--name", merge_name, "--label", pods.LABEL, "--volume", f"{claim}:/runs", image,
                             *merge, timeout=180, check=False)
    finally:
        pods.podman("rm", "--force", merge_name, check=False)
        network.close()
    assert merged.returncode == 0, merged.stdout[-3000:] + merged.stderr[-3000:]
    assert "cluster images/sec = " in merged.stdout or "cluster examples/sec = " in merged.stdout
    record = cluster_record(str(claim / run_id))
    assert record["status"] == "ok" and record["num_workers"] == 2
    hosts = {r["host"] for r in records(str(claim / run_id)) if r.get("kind") == "task"}
    assert hosts <= {p.dns for p in started} and hosts, hosts
