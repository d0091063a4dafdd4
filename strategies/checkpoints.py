"""Checkpoints for restarting a run after a fault (--checkpoint_every).

Every K steps the model and optimizer are saved: under MultiWorkerMirroredStrategy by every worker
(as it wants; worker 0 writes the run's checkpoints/, the others a private directory removed
afterwards), under ParameterServerStrategy by the coordinator, which reads the ps' variables.
When the launcher restarts the cluster after a killed task, every task that trains restores the
latest checkpoint before its first step and carries on from the step it holds; the first step
after a restore traces the step function again, so it counts as warm-up, not as measured.
"""
from __future__ import annotations

import os
import re
import shutil
from typing import Optional

DIRECTORY = "checkpoints"


class Checkpoints:
    def __init__(self, adapter, run_path: str):
        from tfbench.framework.tf_import import tf

        self.every, self.total = adapter.config.checkpoint_every, adapter.config.total_steps
        self.shared = os.path.join(run_path, DIRECTORY)
        self.chief = adapter.task.index == 0
        own = self.shared if self.chief else os.path.join(self.shared, f".{adapter.task.name}")
        self.checkpoint = tf.train.Checkpoint(model=adapter.model, optimizer=adapter.optimizer)
        self.manager = tf.train.CheckpointManager(self.checkpoint, own, max_to_keep=1)
        self.own = own

    def restore(self) -> int:
        """The step the latest checkpoint of the run holds (0: none, nothing restored)."""
        from tfbench.framework.tf_import import tf

        latest = tf.train.latest_checkpoint(self.shared)
        if latest is None:
            return 0
        self.checkpoint.restore(latest).assert_existing_objects_matched()
        return int(re.search(r"-(\d+)$", latest).group(1))

    def before(self, i: int) -> None:
        pass

    def after(self, i: int) -> None:
        """After step i (0-based): every K steps, while a restore from it would leave a step to
        measure (the first step after a restore is not measured)."""
        done = i + 1
        if done % self.every == 0 and done < self.total - 1:
            self.manager.save(checkpoint_number=done)
            if not self.chief:
                shutil.rmtree(self.own, ignore_errors=True)  # only the chief's copy is kept


def make(adapter, run) -> Optional[Checkpoints]:
    if not adapter.config.checkpoint_every or run is None:
        return None
    return Checkpoints(adapter, run.path)
