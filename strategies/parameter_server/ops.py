"""Small graph pieces every parameter-server closure shares (async, sync and bounded staleness):
kept below the strategy module so that its training loops and the strategy import one way.
"""
from __future__ import annotations

import dataclasses
from typing import List


@dataclasses.dataclass
class PsLog:
    """What the coordinator saw of its closures besides the steps' timings, over the whole run
    (warm-up, measured window and the pull probe)."""

    lost: int = 0  # closure results lost with a killed worker (strategies.parameter_server.rounds.fetched)
    bound_waits: int = 0  # closures that found their worker too far ahead (--ps_staleness_bound)
    late_updates: List[dict] = dataclasses.field(default_factory=list)  # updates past a phase's last round
    shards_used: List[List[int]] = dataclasses.field(default_factory=list)  # workers of each round
    updates_before: int = 0  # the optimizer's updates when the measured window started

    def round_done(self, i: int, results: List[dict]) -> None:
        """A round of N closures (a global step, or N asynchronous updates) was fetched: which
        workers ran it, and which global step each closure belongs to (ps_split.global_steps)."""
        self.shards_used.append(sorted(r["worker"] for r in results))
        for r in results:
            r["round"] = i


# A worker killed and restarted under the same address: the coordinator's reused gRPC channel asks
# the new server for an output of the old one, and gets this answer (TensorFlow's own
# cluster_coordinator._is_worker_failure treats the same situation's "Unable to find the relevant
# tensor remote_handle" as a worker failure).
REPLACED_SERVER = "Unable to parse request"


def lost_with_worker(error) -> bool:
    """Whether a fetch or a read from a worker failed because the worker went away (not a fault of
    the step)."""
    from tfbench.framework.tf_import import tf

    if isinstance(error, (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError)):
        return True
    return isinstance(error, tf.errors.InternalError) and REPLACED_SERVER in str(error)


def settled(value, variables):
    """`value`, available only once every earlier write to `variables` is done.

    A step's updates are remote assignments on the ps that nothing downstream reads, so a
    timestamp would not wait for them. TensorFlow orders ops on one resource in program order:
    asking each variable its shape afterwards (VariableShape, on its own ps: a read-only op of the
    variable, ordered after its writes) makes the value wait for the writes. The shape, not the
    value: a variable once read sparsely (an embedding table's lookup, its row update) copies
    itself whole on every later read, which here cost every update a copy of every table.
    """
    from tfbench.framework.tf_import import tf

    with tf.control_dependencies(written(variables)):
        return tf.identity(value)


def written(variables) -> list:
    """One op on each device holding a part of `variables`, done once every earlier write to the
    parts there is (settled's marks, grouped where they run). A mark that another task waits on is
    a message from its device to that task: one group per device sends one, where a mark per
    shard sent one per shard (28 a closure to the worker on the recommender's 2 ps)."""
    from tfbench.framework.tf_import import tf

    marks = {}
    for v in variables:
        for part in getattr(v, "variables", None) or [v]:  # shards of a ShardedVariable
            with tf.device(part.device):
                marks.setdefault(part.device, []).append(tf.raw_ops.VariableShape(input=part.handle))
    groups = []
    for device, shapes in marks.items():
        with tf.device(device):
            groups.append(tf.group(*shapes))
    return groups


def counted(applying, variables) -> list:
    """What an update's count waits for so that it comes after every write of the update: what
    the optimizer's apply_gradients returned, when that is its own count of the update, made once
    every write is done (the legacy optimizers' op, on the ps of their `iterations`); else (tf_keras'
    v2 optimizers return their `iterations` variable, whose increment waits for no write) a mark
    of every part written (written)."""
    from tfbench.framework.tf_import import tf

    if isinstance(applying, (tf.Operation, tf.Tensor)):
        return [applying]
    return written(variables)


def reads_beside_batch(sync: bool, bound: int) -> bool:
    """Whether an update reads the counter and the weights as its closure starts, beside its batch
    (unbounded asynchronous, as TensorFlow's tutorial step does), not once the batch is in hand
    (synchronous; under a staleness bound, after the clocks): the step's order and its split's."""
    return not sync and bound < 0


def in_hand(batch):
    """tf.timestamp() once every tensor of `batch` exists on the worker: where a closure's wait for
    its input ends (a synchronous closure's reads of the weights, and a bounded one's, wait for it,
    so that input, pull and compute follow one another; an unbounded asynchronous closure reads
    them beside its batch, as TensorFlow's tutorial step does)."""
    from tfbench.framework.tf_import import tf

    with tf.control_dependencies(tf.nest.flatten(batch)):
        return tf.timestamp()


def packed(outputs):
    """A closure's scalar outputs as one float64 vector, under a key naming them in its order.

    The coordinator copies every output of a closure whose result is still held to itself, one
    call each, in the thread that dispatches that worker's next closure, so the worker idles for
    those calls: with eight outputs an asynchronous worker of the recommender waited about 23 ms
    between updates, with one about 10 ms (2 workers on 2 cores, 2026-11-27; tools.bench's
    parameter-server row). float64 holds the timestamps and the loss, and integers below 2**53
    (versions, worker indices), exactly."""
    from tfbench.framework.tf_import import tf

    names = sorted(outputs)
    return {",".join(names): tf.stack([tf.cast(outputs[k], tf.float64) for k in names])}


def unpacked(result) -> dict:
    """A fetched packed(...) result as {name: float}."""
    ((key, vector),) = result.items()
    return dict(zip(key.split(","), (float(v) for v in vector)))


def on_this_worker(values):
    """`values` as outputs of the closure's function, free of the strategy's partial device.

    ParameterServerStrategy runs each replica under "/device:CPU:0" (or GPU:0), which matches
    every task of the cluster. Without soft placement TensorFlow refuses a function output whose
    producing op (found through any Identity) names such a spec (PinArgsAndRets). A StopGradient,
    not an Identity, with no device of its own ends that search: the output then goes to the
    function's target device, the worker the coordinator dispatched the closure to.
    """
    from tfbench.framework.tf_import import tf

    return tf.nest.map_structure(tf.stop_gradient, values)
