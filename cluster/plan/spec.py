"""TaskSpec and ClusterPlan: the stable description of every process of a run.

Strategies read their task from a TaskSpec, never from ad-hoc environment parsing; launchers
start the processes a ClusterPlan lists. Both serialise to plan.json in the run directory.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Dict, List, Optional, Tuple

from tfbench.config import strategy_traits
from tfbench.config.strategy_traits import Traits


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    role: str  # "worker", "chief" or "ps"
    index: int
    host: str
    port: int = 0  # 0: the task serves no port
    cores: Tuple[int, ...] = ()  # () : not pinned (remote host, or unknown cores)
    intra_threads: int = 0  # 0: TensorFlow's default
    inter_threads: int = 0
    tf_config: Optional[dict] = None
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    service: bool = False  # serves until stopped (parameter-server strategy's ps and workers)
    measures: bool = True  # runs timed steps and reports progress
    horovod_rank: int = -1  # >= 0 for a launcher's rank (Horovod)
    shares_cores_with: Tuple[str, ...] = ()  # other tasks pinned to any of this task's cores

    @property
    def name(self) -> str:
        return f"{self.role}_{self.index}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def full_env(self) -> Dict[str, str]:
        """Environment variables this task needs on top of the launcher's."""
        env = dict(self.env)
        if self.tf_config is not None:
            env["TF_CONFIG"] = json.dumps(self.tf_config, sort_keys=True)
        return env

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["cores"] = list(self.cores)
        d["shares_cores_with"] = list(self.shares_cores_with)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TaskSpec":
        d = dict(d)
        d["cores"] = tuple(d.get("cores", ()))
        d["shares_cores_with"] = tuple(d.get("shares_cores_with", ()))
        return cls(**d)


@dataclasses.dataclass(frozen=True)
class ClusterPlan:
    strategy: str
    tasks: Tuple[TaskSpec, ...]
    cluster_spec: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
    horovod_hosts: str = ""  # "host:slots,..." for horovodrun; "" otherwise
    warnings: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()  # facts of the plan that are no warning (e.g. what Slurm's nodes hold)

    def task(self, name: str) -> TaskSpec:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(f"no task {name!r} in the plan")

    def horovod_rank(self, rank: int) -> TaskSpec:
        for t in self.tasks:
            if t.horovod_rank == rank:
                return t
        raise KeyError(f"no Horovod rank {rank} in the plan")

    @property
    def traits(self) -> Traits:
        """What the plan's strategy does (tfbench.config.strategy_traits): e.g. whether a coordinator drives."""
        return strategy_traits.of(self.strategy)

    @property
    def ranked_tasks(self) -> Tuple[TaskSpec, ...]:
        """The tasks that are launcher ranks (horovodrun, or Horovod's rendezvous), in rank order;
        the plan's other tasks start one process each."""
        return tuple(sorted((t for t in self.tasks if t.horovod_rank >= 0), key=lambda t: t.horovod_rank))

    @property
    def workers(self) -> Tuple[TaskSpec, ...]:
        return tuple(t for t in self.tasks if t.role in ("worker", "chief") and t.measures)

    def to_dict(self) -> dict:
        return {
            "strategy": self.strategy,
            "tasks": [t.to_dict() for t in self.tasks],
            "cluster_spec": self.cluster_spec,
            "horovod_hosts": self.horovod_hosts,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "ClusterPlan":
        """A plan read back from plan.json (write_plan)."""
        return cls(
            strategy=d["strategy"],
            tasks=tuple(TaskSpec.from_dict(t) for t in d["tasks"]),
            cluster_spec=d.get("cluster_spec", {}),
            horovod_hosts=d.get("horovod_hosts", ""),
            warnings=tuple(d.get("warnings", ())),
            notes=tuple(d.get("notes", ())),
        )


def write_plan(run, plan: ClusterPlan) -> None:
    """plan.json in the run directory `run` (a RunDir), what every task reads its role, host, port
    and cores from: written only when the run is prepared (tfbench.app.run_setup) and again by
    supervision before tasks start on a changed plan (a launcher's addresses, ports replaced after a
    bind failure)."""
    run.write_json("plan.json", plan.to_dict())
