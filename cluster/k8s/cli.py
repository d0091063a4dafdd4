"""`python -m cluster.k8s <tfbench flags> --out_dir=DIR`: Kubernetes manifests for a run's cluster.

Three alternatives for the same topology, each a self-contained YAML file (cluster.k8s.manifests
builds them): jobset.yaml (a JobSet of one replicated job per role: the maintained way to run a
job of several roles, kubernetes-sigs/jobset), tfjob.yaml (a Kubeflow TFJob for clusters still
running the v1 Training Operator) and indexed-jobs.yaml (plain Indexed Jobs, one per role, and a
headless Service: nothing to install). Each carries the run's config.json and plan.json in a
ConfigMap; the run directory is a ReadWriteMany PersistentVolumeClaim (--pvc) mounted at /runs in
every pod, so task records merge as usual: `python -m cluster.merge --run_dir /runs/<run_id>` in
any pod mounting it. Servers listen on port 2222; each pod requests and is limited to its role's
cores.
"""
from __future__ import annotations

import os
from typing import Dict

import yaml
from absl import app, flags

import tfbench.config as config_lib
from cluster.k8s.manifests import MANIFESTS, RUNS, Target, check_target
from tfbench.config import RunConfig, helptext
from tfbench.config import flags as tfbench_flags
from tfbench.config.errors import ConfigError
from tfbench.config.kinds import KINDS

flags.DEFINE_string("out_dir", "k8s", "Directory the manifests are written to.")
flags.DEFINE_string("image", "tfbench:latest", "Container image with tfbench at --workdir and its requirements.")
flags.DEFINE_string("workdir", "/tfbench", "Where tfbench is inside the image.")
flags.DEFINE_string("namespace", "default", "Kubernetes namespace.")
flags.DEFINE_string("pvc", "tfbench-runs", "ReadWriteMany PersistentVolumeClaim holding the run directories.")


def write(out_dir: str, config: RunConfig, target: Target) -> Dict[str, str]:
    os.makedirs(out_dir, exist_ok=True)
    written = {}
    for file_name, build in MANIFESTS.items():
        path = os.path.join(out_dir, file_name)
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump_all(build(config, target), f, sort_keys=False)
        written[file_name] = path
    return written


def main(argv) -> int:
    if len(argv) > 1:
        helptext.fail_usage(f"unexpected arguments: {' '.join(argv[1:])}")
    fv = flags.FLAGS
    try:
        config = config_lib.validate(tfbench_flags.config_from_flags(), kind=KINDS["kubernetes"])
        if not config.run_id:
            from tfbench.results.rundir import default_run_id

            config = config.replace(run_id=default_run_id(config.model, config.strategy, config.num_workers))
        config = config.replace(logdir=RUNS)
        target = Target(fv.image, fv.workdir, fv.namespace, fv.pvc)
        check_target(target)
    except ConfigError as e:
        helptext.fail_usage(str(e))
    written = write(fv.out_dir, config, target)
    for path in written.values():
        print(f"tfbench: wrote {path}")
    print(f"kubectl apply -f {written['jobset.yaml']}   # JobSet; or {written['tfjob.yaml']} (Kubeflow v1 "
          f"Training Operator), or {written['indexed-jobs.yaml']} (plain Kubernetes)")
    print(f"then, in a pod mounting {fv.pvc}: python -m cluster.merge --run_dir {RUNS}/{config.run_id}")
    return 0


def help_groups():
    return helptext.names_of(tfbench_flags.GROUPS) + [("Manifests", ["out_dir", "image", "workdir", "namespace", "pvc"])]


def run_main() -> None:
    app.run(main, flags_parser=helptext.parser(__doc__, help_groups, "cluster.k8s", tfbench_flags.define_flags))
