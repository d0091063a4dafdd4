"""The run's TensorBoard opens on what matters: a custom-scalars layout (TensorBoard's
custom_scalar plugin) with every worker's step time in one chart, every host's traffic in one
chart and every task's CPU in one chart.

Each chart is a multiline chart over a tag regex: TensorBoard draws one line per run directory
holding the tag (tb/worker_0, tb/host_h0, ...). The layout summary is built from TensorBoard's
own protos (the plugin's summary.pb() would import TensorFlow, which the launcher never does).
"""
from __future__ import annotations

from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
from tensorboard.plugins.custom_scalar import layout_pb2, metadata

from tfbench.results.rundir import RunDir
from tfbench.tensorboard.events import EventWriter

CHARTS = (
    ("step time (ms), every worker", (r"^perf/step_time_ms$",)),
    ("host traffic (kbit/s), every host: tx and rx", (r"^link/(tx|rx)_kbps$", r"^host/net_.*_(tx|rx)_kbps$")),
    ("CPU (% of one core), every task", (r"^sys/cpu_percent$",)),
    ("where each global step's time goes (ms), stacked: the bands between lines are compute, "
     "communication, input, apply and waiting", (r"^split_stacked/",)),
    ("bandwidth each global step's communication achieved (Gbit/s): algbw, and busbw as nccl-tests defines it",
     (r"^comm/(alg|bus)bw_gbit_s$",)),
)
ELASTIC_CHART = ("ranks in each step (Horovod elastic), every rank", (r"^perf/ranks$",))


def layout(run_id: str, elastic: bool = False) -> layout_pb2.Layout:
    charts = [layout_pb2.Chart(title=title, multiline=layout_pb2.MultilineChartContent(tag=list(tags)))
              for title, tags in CHARTS + ((ELASTIC_CHART,) if elastic else ())]
    return layout_pb2.Layout(category=[layout_pb2.Category(title=run_id, chart=charts)])


def layout_summary(value: layout_pb2.Layout) -> summary_pb2.Summary:
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[value.SerializeToString()],
                                    tensor_shape=tensor_shape_pb2.TensorShapeProto())
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(
        tag=metadata.CONFIG_SUMMARY_TAG, metadata=metadata.create_summary_metadata(), tensor=tensor)])


def write_layout(run: RunDir, elastic: bool = False) -> None:
    """tb/ gets the layout (in an event file of its own, beside the HParams); an elastic run also
    the ranks in each step, under the step times on the same time axis."""
    with EventWriter(run.tb_dir, suffix=".layout") as writer:
        writer.summary(layout_summary(layout(run.run_id, elastic)))
