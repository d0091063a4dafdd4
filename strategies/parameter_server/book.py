"""Each asynchronous closure's record kept on its own worker, read by the coordinator a chunk of
rounds at a time, instead of returned by the closure.

ClusterCoordinator's worker thread copies every output of a closure whose RemoteValue is still
held to the coordinator once the closure has ended, before it dispatches that worker's next
closure: a worker whose records are held idles for that round trip between updates. A result
nobody holds is not copied, as in TensorFlow's parameter-server tutorial. So each closure writes
its record (strategies.parameter_server.ops.packed's vector) into a ring of rows in a per-worker
variable (`tf.Variable(..., per_worker_variable=True)`: one copy on each worker, written by the
closures that run there), and the coordinator reads every worker's new rows once per chunk of
rounds (strategies.parameter_server.rounds.KeptRounds).

A restarted worker starts with an empty ring (the coordinator re-creates per-worker resources on
it): the records it had not been read of are lost with it, as a held result is.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Sequence

from strategies.parameter_server.ops import lost_with_worker

RING_ROWS = 4096  # records a worker may write between two reads (a chunk's rounds and what runs ahead)


class Book:
    """The rings (rows of float64 fields) and their write counters, one of each per worker."""

    def __init__(self, strategy, num_workers: int, fields: Sequence[str], rows: int = RING_ROWS):
        from tfbench.framework.tf_import import tf

        self.rows, self.fields = rows, sorted(fields)
        self.read_upto = [0] * num_workers  # records of each worker read so far (its counter then)
        self._tf = tf
        with strategy.scope():
            self._ring = tf.Variable(tf.zeros([rows, len(self.fields)], tf.float64), trainable=False,
                                     per_worker_variable=True, name="closure_records")
            self._count = tf.Variable(tf.constant(0, tf.int64), trainable=False, per_worker_variable=True,
                                      name="closure_records_written")

    def write(self, key: str, vector):
        """In the traced closure: appends the record (packed's key names its fields, sorted);
        returns the op that counts it. The row is written before the count shows it, so that a
        read never takes a row still being written (a worker runs one closure at a time: no two
        writers)."""
        tf = self._tf
        if key.split(",") != self.fields:
            raise ValueError(f"a closure's record has the fields {key}, its book {','.join(self.fields)}")
        slot = tf.math.floormod(self._count.read_value(), self.rows)
        written = self._ring.scatter_nd_update(tf.reshape(slot, [1, 1]), tf.reshape(vector, [1, -1]))
        with tf.control_dependencies([written]):
            return self._count.assign_add(1)

    def read(self) -> "Reading":
        """Every record written since the last read, on every worker that answered: each worker's
        count first, then only its new rows (a gather on the worker)."""
        reading = Reading()
        for worker, (count, ring) in enumerate(zip(_on_workers(self._count), _on_workers(self._ring))):
            try:
                count = int(_variable(count).numpy())
                if count < self.read_upto[worker]:  # restarted: what it wrote before is gone
                    reading.restarted.append(worker)
                    self.read_upto[worker] = 0
                first = max(self.read_upto[worker], count - self.rows)
                rows = self._tf.gather(_variable(ring), [k % self.rows for k in range(first, count)]).numpy() \
                    if count > first else []  # gathered on the worker: only the new rows travel
            except Exception as e:  # noqa: BLE001 - only a lost worker's errors are kept
                if not lost_with_worker(e):
                    raise
                reading.unanswered.append(worker)
                continue
            reading.overwritten += first - self.read_upto[worker]
            reading.records += [dict(zip(self.fields, (float(x) for x in row))) for row in rows]
            self.read_upto[worker] = count
        return reading


def _on_workers(variable) -> list:
    """A per-worker variable's RemoteValues, one per worker (read_all() copies each whole copy to
    the coordinator and stops at the first worker that is gone)."""
    return variable._per_worker_vars._values  # noqa: SLF001 - no public access to one worker's copy


def _variable(remote):
    """The variable a per-worker RemoteValue stands for, on its worker; raises as a fetch would
    when the worker is gone or its resources are being made again."""
    remote._wait_and_maybe_error()  # noqa: SLF001
    return remote._values  # noqa: SLF001


@dataclasses.dataclass
class Reading:
    """What one read of the books found: the new records, the workers that did not answer or had
    restarted since the last read, and records overwritten before they were read."""

    records: List[Dict[str, float]] = dataclasses.field(default_factory=list)
    unanswered: List[int] = dataclasses.field(default_factory=list)
    restarted: List[int] = dataclasses.field(default_factory=list)
    overwritten: int = 0
