"""Applies --fault during a run and says what the launcher should do when a faulted task exits.

The trigger is the cluster's progress: once the task furthest along has finished warm-up plus
STEP measured steps, the fault's task gets SIGKILL (kill) or SIGSTOP (hang), sent to its own
process group when it has one to itself, else to its process. What follows depends on the
strategy: a killed parameter-server worker is restarted with the same command (same address,
same TF_CONFIG) and the coordinator, which re-runs the closures the worker lost, carries on; any
other killed task ends the run as a failure that names the fault (under Slurm the whole job:
its step ends with any task, so a killed worker restarts the cluster from a checkpoint or ends
the run), except a Horovod elastic rank:
horovodrun's elastic driver drops it and starts it again itself, and the injector only notes when
the new process reports ready (its rank joined the others). A hung task stays stopped
until teardown continues it (a stopped process cannot act on SIGTERM).
"""
from __future__ import annotations

import os
import signal
import time
from typing import Callable, Dict, List, Optional

from tfbench.config.faults import Fault
from tfbench.config.kinds import kind_of
from tfbench.loop import progress

SIGNALS = {"kill": signal.SIGKILL, "hang": signal.SIGSTOP}


class FaultInjector:
    def __init__(self, faults: List[Fault], config, run_path: str, message: Callable[[str], None]):
        self.pending = list(faults)
        self.config, self.run_path, self.message = config, run_path, message
        self.applied: Dict[str, dict] = {}  # task -> what was done and when
        self.stopped: List[int] = []  # process groups (or pids, negative) left stopped

    # -- applying
    def tick(self, progress_by_task: Dict[str, Optional[dict]], target: Callable[[str], tuple]) -> None:
        """Applies every pending fault whose step the cluster has reached. `target(task)` gives
        (pid, whole_group): the task's process, and whether its process group is its own."""
        done = max([r.get("step", 0) for r in progress_by_task.values()
                    if r and r.get("phase") in ("warmup", "measure", "done")] or [0])
        measured = done - self.config.num_warmup_steps
        for fault in [f for f in self.pending if measured >= f.step]:
            self.pending.remove(fault)
            pid, group = target(fault.task)
            self._apply(fault, pid, group, measured)

    def _apply(self, fault: Fault, pid: Optional[int], group: bool, measured: int) -> None:
        entry = dict(fault.to_dict(), applied_at_measured_step=measured, wall=time.time(), pid=pid,
                     signal=SIGNALS[fault.kind].name, target="process group" if group else "process")
        try:
            if pid is None:
                raise ProcessLookupError("no process")
            (os.killpg if group else os.kill)(pid, SIGNALS[fault.kind])
        except OSError as e:  # gone already, or not ours to signal
            entry["error"] = f"{fault.task} could not be signalled ({e})"
        else:
            if fault.kind == "hang":
                self.stopped.append(-pid if not group else pid)
        self.applied[fault.task] = entry
        self.message(f"tfbench: fault: {fault.task} {fault.kind} ({entry['signal']}) after measured step "
                     f"{measured}" + (f": {entry['error']}" if "error" in entry else ""))

    # -- what the launcher does next
    def killed(self, task: str) -> bool:
        entry = self.applied.get(task)
        return bool(entry and entry["kind"] == "kill" and "error" not in entry)

    def killed_in(self, tasks) -> Optional[str]:
        """The first of `tasks` (a unit's) that a fault killed, or None."""
        return next((t for t in tasks if self.killed(t)), None)

    def restarts(self, task: str) -> bool:
        """A killed parameter-server worker (not yet restarted) comes back at its address; not under
        Slurm, whose step ends with any task (--kill-on-bad-exit)."""
        return (self.killed(task) and self.config.traits.coordinated and task.startswith("worker_")
                and kind_of(self.config).restarts_tasks and "restarted_wall" not in self.applied[task])

    def restarts_cluster(self, task: str) -> bool:
        """A killed task the run survives only by starting every task again from the last
        checkpoint: an all-reduce worker, a parameter server or the coordinator (not a
        parameter-server worker, which restarts alone, except under Slurm, whose job is
        submitted again as a whole)."""
        traits = self.config.traits
        alone = task.startswith("worker_") and kind_of(self.config).restarts_tasks
        whole = traits.checkpoints and not (traits.coordinated and alone)
        return (self.killed(task) and whole and self.config.checkpoint_every > 0
                and "cluster_restarted_wall" not in self.applied[task])

    def cluster_restarted(self, task: str) -> None:
        self.applied[task]["cluster_restarted_wall"] = time.time()
        self.message(f"tfbench: fault: {task} killed; restarting every task from the last checkpoint")

    def restarted(self, task: str, pid: int) -> None:
        self.applied[task].update(restarted_wall=time.time(), restarted_pid=pid)
        self.message(f"tfbench: fault: restarted {task} at its address (pid {pid})")

    def rejoins(self, task: str) -> bool:
        """A killed Horovod elastic rank, which horovodrun's driver starts again by itself."""
        return self.killed(task) and self.config.traits.elastic and self.config.horovod_elastic

    def watch_recovery(self) -> None:
        """Notes when a restarted task reports ready again (its server is up, its rank joined)."""
        for task, entry in self.applied.items():
            rejoins = self.rejoins(task)  # elastic: the new pid is the driver's, learnt from progress
            if "ready_wall" in entry or not (rejoins or "restarted_wall" in entry):
                continue
            record = progress.read_progress(self.run_path, task)
            if not record or not progress.reached(record, "ready"):
                continue
            pid = record.get("pid")
            if not (pid not in (None, entry["pid"]) if rejoins else pid == entry["restarted_pid"]):
                continue  # still the killed process's record
            entry["ready_wall"] = float(record.get("time") or time.time())
            entry["time_to_ready_s"] = entry["ready_wall"] - entry["wall"]
            if record["phase"] != "ready":  # seen first at a later phase: ready by then
                entry["ready_wall_is_upper_bound"] = True
            if rejoins:
                entry.update(restarted_pid=pid, restarted_by="horovodrun's elastic driver")
                self.message(f"tfbench: fault: {task} rejoined (pid {pid}) "
                             f"{entry['time_to_ready_s']:.1f} s after its fault")

    def explain(self, task: str) -> str:
        entry = self.applied.get(task)
        if not entry:
            return ""
        return f" (--fault {entry['kind']} after measured step {entry['applied_at_measured_step']})"

    def release(self) -> None:
        """Continues every hung task, so that teardown's SIGTERM reaches it."""
        for target in self.stopped:
            try:
                (os.killpg if target > 0 else os.kill)(abs(target), signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.stopped = []

    def record(self) -> dict:
        return {"faults": list(self.applied.values()), "faults_not_applied": [f.to_dict() for f in self.pending]}
