"""Held-out accuracy (or AUC) and loss during training, and the time to reach a target.

One task evaluates (the coordinator of a parameter-server run, else worker 0 / rank 0): at the
start of the measured window and every --eval_every steps after, on the held-out part of the
real dataset (tfbench.data.datasets), or on the held-out examples of a workload whose synthetic
labels a model can learn (a recommender's planted clicks: AUC, --target_auc), with the current
weights. Each point holds the training time so far, the updates applied so far and the examples
(images) trained on. TensorBoard gets the points twice: `eval/*` on the run's shared time axis,
`eval_by_update/*` with the update count as the step.

Training time runs from the start of the measured window (warm-up steps train too: their updates
are counted) and leaves out evaluation pauses wherever training waits for them (synchronous
strategies: every worker waits at its next collective or global step). Asynchronous parameter
servers keep training while the coordinator evaluates: nothing is left out there.
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, Dict, List, Optional, Tuple

from tfbench.tensorboard import timeline
from tfbench.tensorboard.events import EventWriter

DEFINITION = ("seconds of training from the start of the measured window (warm-up updates count, evaluation "
              "pauses of synchronous training do not) to the first held-out evaluation at or above the target")


class Evaluator:
    """Evaluates one model on the held-out set and keeps the points of one run."""

    def __init__(self, config, model, tb_dir: Optional[str], run_path: Optional[str], device: Optional[str] = None,
                 pauses_training: bool = True):
        from tfbench.data import datasets
        from tfbench.framework.tf_import import tf

        self.config, self.pauses_training = config, pauses_training
        workload = config.workload
        self.metric, self.unit = ("accuracy", "images") if config.dataset != "synthetic" else (workload.metric,
                                                                                              workload.unit)
        if config.dataset != "synthetic":
            _, _, x_test, y_test = datasets.arrays(config.dataset, config.image_size)
            features, labels = tf.constant(x_test), tf.constant(y_test)
        else:
            with tf.device(device) if device else contextlib.nullcontext():
                features, labels = workload.held_out(config)
        self.labels = labels.numpy()

        @tf.function
        def evaluate():
            with tf.device(device) if device else contextlib.nullcontext():
                logits = tf.cast(model(features, training=False), tf.float32)
                loss = tf.reduce_mean(workload.per_example_loss(labels, logits))
                if self.metric != "accuracy":
                    return loss, logits
                correct = tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32), labels)
                return loss, tf.reduce_mean(tf.cast(correct, tf.float32))

        self._evaluate = evaluate
        evaluate()  # traced now, before the measured window, so that no point pays for tracing
        self.events = EventWriter(tb_dir, suffix=".eval") if tb_dir else None
        self.origin = timeline.origin(run_path) if run_path else 0.0
        self.points: List[Dict] = []
        self.paused_s = 0.0
        self.start_wall: Optional[float] = None

    def due(self, step: int) -> bool:
        """After step `step` (0-based) of the run: a measured step on the --eval_every grid, or the last."""
        c = self.config
        measured = step + 1 - c.num_warmup_steps
        return measured > 0 and (measured % c.effective_eval_every == 0 or step + 1 == c.total_steps)

    def start(self, wall: float, updates: int, examples: int) -> None:
        """The measured window starts: training time is 0 here; the first point is taken."""
        self.start_wall = wall
        self.evaluate(wall, updates, examples, step=self.config.num_warmup_steps)

    def measure(self):
        """(loss, metric) of the weights as they are now."""
        loss, value = self._evaluate()
        if self.metric == "auc":
            from tfbench.workloads.clicks import auc

            return float(loss), auc(self.labels, value.numpy().ravel())
        return float(loss), float(value)

    def evaluate(self, wall: float, updates: int, examples: int, step: int) -> Dict:
        """One point: the weights as they are now, after `updates` updates and `examples` examples."""
        t0 = time.perf_counter()
        loss, value = self.measure()
        spent = time.perf_counter() - t0
        point = {"step": step, "train_s": max(0.0, wall - self.start_wall - self.paused_s), "updates": int(updates),
                 self.unit: int(examples), self.metric: value, "loss": loss, "eval_s": spent}
        if self.pauses_training:
            self.paused_s += spent
        self.points.append(point)
        if self.events:
            scalars = {f"eval/{self.metric}": value, "eval/loss": loss}
            self.events.scalars(scalars, step=timeline.step_ms(self.origin, wall), wall_time=wall)
            self.events.scalars({f"eval_by_update/{k[5:]}": v for k, v in scalars.items()}, step=updates,
                                wall_time=wall)
        return point

    def summary(self) -> Dict:
        """The record's `convergence` field (metric m: accuracy, or a recommender's auc)."""
        c, m = self.config, self.metric
        target = (c.target_accuracy if m == "accuracy" else c.workload.target(c)) or None
        reached = next((p for p in self.points if target and p[m] >= target), None)
        last = self.points[-1] if self.points else {}
        return {
            "dataset": c.dataset if c.dataset != "synthetic" else f"{c.model}'s held-out stream", "metric": m,
            "eval_every": c.effective_eval_every, "points": self.points,
            f"final_{m}": last.get(m), "final_loss": last.get("loss"),
            f"best_{m}": max((p[m] for p in self.points), default=None),
            f"target_{m}": target,
            f"time_to_{m}_s": reached["train_s"] if reached else None,
            f"updates_to_{m}": reached["updates"] if reached else None,
            f"{self.unit}_to_{m}": reached[self.unit] if reached else None,
            "reached": bool(reached) if target else None,
            "evaluation_pauses_s": self.paused_s,
            "evaluation_pauses_training": self.pauses_training,
            "definition": DEFINITION,
        }

    def close(self) -> None:
        if self.events:
            self.events.close()


def make(config, model, run, task_name: str, device: Optional[str] = None,
         pauses_training: bool = True) -> Optional[Evaluator]:
    """An Evaluator for a real-data run, or a run of a workload that evaluates on held-out examples
    of its own (a recommender's, when asked); None otherwise (synthetic images have no accuracy)."""
    if config.dataset == "synthetic" and not config.workload.evaluates(config):
        return None
    return Evaluator(config, model, run.task_tb(task_name) if run is not None else None,
                     run.path if run is not None else None, device, pauses_training)


class Hook:
    """Evaluates between steps of a timing loop (its before/after calls sit outside the timed
    region): the first point as the measured window starts, then on the --eval_every grid.
    `updates()` gives the updates applied so far; each trained on `images_per_update` examples."""

    def __init__(self, evaluator: Evaluator, updates: Callable[[], int], images_per_update: int):
        self.evaluator, self.updates, self.images_per_update = evaluator, updates, images_per_update

    def counts(self) -> Tuple[int, int]:
        updates = self.updates()
        return updates, updates * self.images_per_update

    def before(self, i: int) -> None:  # a run resumed from a checkpoint starts past the warm-up
        if i >= self.evaluator.config.num_warmup_steps and self.evaluator.start_wall is None:
            self.evaluator.start(time.time(), *self.counts())

    def after(self, i: int) -> None:
        if self.evaluator.due(i):
            self.evaluator.evaluate(time.time(), *self.counts(), step=i + 1)
