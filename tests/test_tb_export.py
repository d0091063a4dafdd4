"""tools.report.tb_export: scalars written as tfbench writes them come back unchanged in the CSV."""
import csv
import io
import os
import subprocess
import sys

import numpy as np
from tensorboard.compat.proto import summary_pb2
from tensorboard.util import tensor_util

from tfbench.tensorboard.events import EventWriter
from tools.report import tb_export

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write_run(root):
    """A run's event files: a worker's step times, the host's samples, and one tf.summary-style tensor."""
    written = []
    with EventWriter(os.path.join(root, "tb", "worker_0")) as w:
        for step in range(5):
            t = 1_700_000_000.25 + step
            w.scalars({"perf/step_time_ms": 500.0 + step * 1.5, "perf/images_per_sec": 32.0 - step * 0.1},
                      step=step, wall_time=t)
            written += [("tb/worker_0", "perf/step_time_ms", step, t, 500.0 + step * 1.5),
                        ("tb/worker_0", "perf/images_per_sec", step, t, 32.0 - step * 0.1)]
    with EventWriter(os.path.join(root, "tb", "host")) as w:
        for step in range(3):
            t = 1_700_000_000.5 + step
            w.scalar("sys/cpu_percent", 150.0 + step, step=step, wall_time=t)
            written.append(("tb/host", "sys/cpu_percent", step, t, 150.0 + step))
        metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
        tensor = tensor_util.make_tensor_proto(np.float32(0.875))
        w.summary(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="sys/load", metadata=metadata,
                                                                       tensor=tensor)]),
                  step=7, wall_time=1_700_000_009.0)
        written.append(("tb/host", "sys/load", 7, 1_700_000_009.0, 0.875))
    return written


def _read(text):
    return [(r["run"], r["tag"], int(r["step"]), float(r["wall_time"]), float(r["value"]))
            for r in csv.DictReader(io.StringIO(text))]


def test_scalars_round_trip(tmp_path):
    written = _write_run(str(tmp_path))
    out = io.StringIO()
    assert tb_export.export(str(tmp_path), out) == len(written)
    exported = _read(out.getvalue())
    assert out.getvalue().splitlines()[0] == "run,tag,step,wall_time,value"
    key = lambda r: (r[0], r[1], r[2])  # noqa: E731
    assert sorted(map(key, exported)) == sorted(map(key, written))
    by_key = {key(r): r for r in exported}
    for run, tag, step, wall_time, value in written:
        got = by_key[(run, tag, step)]
        assert got[3] == wall_time
        assert got[4] == float(np.float32(value))  # event files store float32


def test_cli_writes_csv_and_reports_empty_dirs(tmp_path):
    written = _write_run(str(tmp_path / "run"))
    out = tmp_path / "scalars.csv"
    proc = subprocess.run([sys.executable, "-m", "tools.report.tb_export", str(tmp_path / "run"), f"--out={out}"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(_read(out.read_text())) == len(written)
    (tmp_path / "empty").mkdir()
    proc = subprocess.run([sys.executable, "-m", "tools.report.tb_export", str(tmp_path / "empty"), "--out=-"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stdout.strip() == "run,tag,step,wall_time,value"
