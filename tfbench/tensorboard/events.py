"""TensorBoard event files written with explicit wall times, without importing TensorFlow.

Step times and system samples must share one wall-clock axis, and the launcher-side monitor
must stay light, so both write events through TensorBoard's own record writer and protos
rather than tf.summary (which stamps the time of writing and needs TensorFlow).
"""
from __future__ import annotations

import os
import socket
import threading
import time
from typing import Optional

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter


class EventWriter:
    """One append-only event file in `logdir`; safe to call from several threads."""

    def __init__(self, logdir: str, suffix: str = ""):
        os.makedirs(logdir, exist_ok=True)
        name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}{suffix}"
        self.path = os.path.join(logdir, name)
        self._file = open(self.path, "ab")
        self._writer = RecordWriter(self._file)
        self._lock = threading.Lock()
        self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event: event_pb2.Event) -> None:
        with self._lock:
            if self._file.closed:
                return
            self._writer.write(event.SerializeToString())
            self._file.flush()

    def scalar(self, tag: str, value: float, step: int, wall_time: Optional[float] = None) -> None:
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(value))])
        self.summary(summary, step, wall_time)

    def scalars(self, values: dict, step: int, wall_time: Optional[float] = None) -> None:
        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=t, simple_value=float(v)) for t, v in values.items()])
        self.summary(summary, step, wall_time)

    def summary(self, summary: summary_pb2.Summary, step: int = 0, wall_time: Optional[float] = None) -> None:
        self._write(event_pb2.Event(wall_time=time.time() if wall_time is None else wall_time,
                                    step=int(step), summary=summary))

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
