"""TensorFlow's gRPC servers listen on every address and run any graph sent to them. A local
multi-task run starts its tasks in a private network namespace with only loopback: while the run
is going, every task's port refuses connections through this machine's non-loopback addresses
(and its loopback), yet accepts them inside the run's namespace, where the tasks talk."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from cluster.net import netns, netns_exec
from conftest import ROOT, TINY


def outside_addresses():
    return [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")]


def refused(address, port) -> bool:
    try:
        socket.create_connection((address, port), timeout=2).close()
    except OSError:
        return True
    return False


def wait_for_measuring(run, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            progress = [json.load(open(os.path.join(run, "tasks", f"worker_{i}.progress"))) for i in (0, 1)]
            if all(p["phase"] == "measure" for p in progress):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError("the run never started measuring")


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="the private network namespace of a local run needs root")
def test_task_ports_are_unreachable_from_outside_the_run(logdir):
    run = os.path.join(logdir, "isolated")
    proc = subprocess.Popen([sys.executable, "-m", "tfbench", *TINY, f"--logdir={logdir}", "--run_id=isolated",
                             "--strategy=multi_worker_mirrored", "--num_workers=2", "--num_steps=100000"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_measuring(run)
        with open(os.path.join(run, "isolation.json")) as f:
            namespace = json.load(f)["netns"]
        with open(os.path.join(run, "plan.json")) as f:
            ports = [t["port"] for t in json.load(f)["tasks"] if t.get("port")]
        assert namespace and len(ports) == 2
        addresses = outside_addresses() + ["127.0.0.1"]
        for port in ports:
            for address in addresses:
                assert refused(address, port), f"{address}:{port} accepted a connection from outside the run"
            inside = netns_exec.run_in(namespace, lambda: socket.create_connection(("127.0.0.1", port), timeout=2))
            inside.close()  # the server is there, for the run's own tasks
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert namespace not in netns.list_namespaces()  # removed with the run
