"""`python -m cluster.slurm.node_monitor --run_dir DIR`: the system monitor of one Slurm node.

Started once per node as a step of its own. It finds the run's tasks that run on its node (the
pids in their progress files that belong to a local process of this run and, where the task
names its Slurm node, to this node: emulated nodes share one machine's processes) and samples
them with tfbench's Monitor, until tasks/slurm.done appears (or SIGTERM). Its series go where a
local run's do (tb/<task>/), except the node-wide ones: tb/host_<node>/, tb/workers_mean_<node>/
and monitor-<node>.jsonl, so that nodes never write the same files; its summary goes to
tasks/monitor-<node>.json for the merge. On emulated nodes the links' counters are read where
the run's switch is, by the launcher (NodeMonitors, tfbench.monitor.link_monitor), not by the nodes.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Dict, Optional

import psutil

from cluster.plan.spec import ClusterPlan
from cluster.slurm.steps import DONE_FILE
from tfbench.config import RunConfig
from tfbench.config.kinds import kind_of
from tfbench.loop import progress
from tfbench.monitor.link_monitor import LinkMonitor
from tfbench.monitor.output import HOST, WORKERS_MEAN
from tfbench.results.rundir import RunDir

POLL_S = 0.5
STOP_WAIT_S = 15.0
SUMMARY_PREFIX = "monitor-"


@dataclasses.dataclass(frozen=True)
class NodeRunDir(RunDir):
    """The run directory as one node's monitor writes it: node-wide series under the node's name."""

    node: str = ""

    def file(self, name: str) -> str:
        if name == "monitor.jsonl":
            name = f"monitor-{self.node}.jsonl"
        return super().file(name)

    def task_tb(self, task_name: str) -> str:
        node_wide = task_name in (HOST, WORKERS_MEAN)
        return super().task_tb(f"{task_name}_{self.node}" if node_wide else task_name)


def local_task_pid(run: RunDir, name: str, node: str):
    """The task's pid when that process runs on this node and belongs to this run, else None."""
    record = progress.read_progress(run.path, name)
    if not record or not record.get("pid") or record.get("node", node) != node:
        return None
    try:
        proc = psutil.Process(int(record["pid"]))
        return proc.pid if run.path in proc.cmdline() else None
    except psutil.Error:
        return None


def summary_path(run: RunDir, node: str) -> str:
    return os.path.join(run.tasks_dir, f"{SUMMARY_PREFIX}{node}.json")


def read_summaries(run: RunDir) -> Dict[str, dict]:
    """Node -> its monitor summary, for the cluster record's resources."""
    found = {}
    for entry in sorted(os.listdir(run.tasks_dir)):
        if entry.startswith(SUMMARY_PREFIX) and entry.endswith(".json"):
            try:
                with open(os.path.join(run.tasks_dir, entry), encoding="utf-8") as f:
                    found[entry[len(SUMMARY_PREFIX):-5]] = json.load(f)
            except (OSError, ValueError):
                continue
    return found


class NodeMonitors:
    """What supervision sees as the run's monitor under Slurm: the node monitors, one per node.

    Inside an allocation start() runs their step; from outside, the sbatch script does. Each
    node's monitor finds its own tasks, so add() has nothing to do; stop() writes the done file,
    waits briefly for every node's summary and returns them as {"nodes": {node: summary}}, with
    "host_links" on emulated nodes, whose links are sampled here."""

    def __init__(self, run: RunDir, plan: ClusterPlan, config: RunConfig, start_step: bool):
        from cluster.slurm import steps

        self.run, self.plan, self.config = run, plan, config
        self.nodes = steps.num_nodes(config, plan)
        self.start_step = start_step
        self.step: Optional[subprocess.Popen] = None
        self.links = LinkMonitor(run, config.monitor_interval) if kind_of(config).emulated_hosts else None

    def add(self, task_name: str, pid: int) -> None:
        pass

    def start(self) -> None:
        from cluster.slurm import steps

        if self.links is not None:
            self.links.start()
        if not self.start_step or self.step is not None:
            return
        with open(self.run.task_log("srun-monitor"), "ab") as log:
            self.step = subprocess.Popen(steps.monitor_step(self.run, self.config, self.plan), stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=steps.environment(self.run, 0), start_new_session=True)

    def stop(self) -> dict:
        with open(self.run.file(os.path.join("tasks", DONE_FILE)), "w", encoding="utf-8"):
            pass
        end = time.monotonic() + STOP_WAIT_S
        while len(read_summaries(self.run)) < self.nodes and time.monotonic() < end:
            if self.step is not None and self.step.poll() is not None:
                break
            time.sleep(POLL_S)
        if self.step is not None:
            try:
                self.step.wait(max(1.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.step.terminate()  # srun cancels the step
                self.step.wait(10)
        return {"nodes": read_summaries(self.run), **(self.links.stop() if self.links is not None else {})}


def main(argv=None) -> int:
    from tfbench.monitor import Monitor

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run_dir", required=True)
    args = parser.parse_args(argv)
    node = os.environ.get(progress.NODE_ENV) or socket.gethostname()  # as the tasks' progress names it
    run = RunDir(args.run_dir)
    plan = ClusterPlan.from_dict(run.read_json("plan.json"))
    config = RunConfig.from_dict(run.read_json("config.json"))
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    monitor = Monitor(NodeRunDir(run.path, node), plan, config, links_factory=lambda _: None,
                      tasks_in_namespaces=kind_of(config).emulated_hosts)
    followed: Dict[str, int] = {}
    while not stopping and not os.path.exists(run.file(os.path.join("tasks", DONE_FILE))):
        for task in plan.tasks:
            pid = local_task_pid(run, task.name, node)
            if pid is not None and followed.get(task.name) != pid:
                monitor.add(task.name, pid)
                followed[task.name] = pid
                monitor.start()
        time.sleep(POLL_S)
    summary = monitor.stop()
    tmp = summary_path(run, node) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(summary, f, default=str)
    os.replace(tmp, summary_path(run, node))
    return 0


if __name__ == "__main__":
    sys.exit(main())
