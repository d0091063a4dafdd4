"""`python -m cluster.k8s.rendezvous PLAN_JSON COMMAND... --run_dir DIR`: a pod's Horovod rank beside its TF_CONFIG.

A strategy whose workers are Horovod ranks that also join a TF cluster holding ps tasks (the
hybrid) meets twice: through TF_CONFIG, which cluster.k8s.index (JobSet, Indexed Jobs) or the
training operator (TFJob) sets, and at Horovod's Gloo rendezvous, which no controller serves.
Rank 0's pod serves it: this wrapper forks the rendezvous server (cluster.horovod.gloo, a process
that ends with the pod's task) and writes its port to the run directory every pod mounts; every
rank waits for that file, takes the environment gloo_run would give it (its rank is its worker
index; its host, as Horovod's host list names it, its pod's DNS name) and replaces itself with
COMMAND. A task that is no rank (a ps) runs COMMAND unchanged.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
import time
from typing import Optional

from cluster.horovod import gloo as horovod_gloo
from cluster.plan.spec import ClusterPlan, TaskSpec

PORT_FILE = "tasks/horovod-rendezvous.json"
WAIT_S = 300.0  # rank 0's pod may be scheduled minutes after the others
PR_SET_PDEATHSIG = 1


def task_of(plan: ClusterPlan, tf_config: dict) -> TaskSpec:
    task = tf_config["task"]
    return plan.task(f"{task['type']}_{int(task['index'])}")


def serve_rendezvous(plan: ClusterPlan, port_file: str) -> None:
    """Forks the rendezvous server; the child writes its port to port_file and lives as long as
    this process (and the command it becomes: exec keeps the pid)."""
    parent = os.getpid()
    if os.fork():
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # taken by sigwait below, in every thread
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the task ended before the death signal was armed
        os._exit(0)
    rendezvous = horovod_gloo.start_rendezvous(plan)
    os.makedirs(os.path.dirname(port_file), exist_ok=True)
    partial = f"{port_file}.partial"
    with open(partial, "w", encoding="utf-8") as f:
        json.dump({"port": rendezvous.port}, f)
    os.replace(partial, port_file)  # whole or absent: the ranks read it as soon as it exists
    signal.sigwait({signal.SIGTERM})
    os._exit(0)


def rendezvous_port(port_file: str, wait_s: float = WAIT_S) -> int:
    end = time.monotonic() + wait_s
    while not os.path.exists(port_file):
        if time.monotonic() > end:
            raise TimeoutError(f"rank 0 wrote no rendezvous port to {port_file} within {wait_s:g} s")
        time.sleep(0.2)
    with open(port_file, encoding="utf-8") as f:
        return int(json.load(f)["port"])


def rank_environment(plan: ClusterPlan, task: TaskSpec, run_dir: str) -> Optional[dict]:
    """The Horovod environment of the pod's task (None for a task that is no rank); rank 0 also
    starts the rendezvous."""
    if task.horovod_rank < 0:
        return None
    port_file = os.path.join(run_dir, PORT_FILE)
    if task.horovod_rank == 0:
        if os.path.exists(port_file):
            os.remove(port_file)  # an earlier attempt's
        serve_rendezvous(plan, port_file)
    host = plan.horovod_rank(0).host
    address = socket.gethostbyname(host)
    return horovod_gloo.rank_env(plan, task.horovod_rank, host, rendezvous_port(port_file),
                                 horovod_gloo.iface_towards(address))


def main(argv) -> int:
    if len(argv) < 3 or "--run_dir" not in argv[:-1]:
        print("usage: python -m cluster.k8s.rendezvous PLAN_JSON COMMAND... --run_dir DIR", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        plan = ClusterPlan.from_dict(json.load(f))
    command = argv[2:]
    run_dir = command[command.index("--run_dir") + 1]
    try:
        env = rank_environment(plan, task_of(plan, json.loads(os.environ["TF_CONFIG"])), run_dir)
    except (KeyError, ValueError, TimeoutError, OSError) as e:
        print(f"cluster.k8s.rendezvous: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    os.environ.update(env or {})
    os.execvp(command[0], command)
    return 1  # not reached: execvp replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))
