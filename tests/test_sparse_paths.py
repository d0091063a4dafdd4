"""Each strategy's path for an embedding table's gradient, read from its traced step (the records'
`step_graph`, strategies.step_graph: the ops of the graph TensorFlow traced, nested graphs
included) on the shared recommender runs of tests/clusters.py (4 tables of 2000 rows x 8 dims,
each split over 2 ps under the parameter server):

- parameter server: the worker step gathers a table's rows on the ps and sends their gradients
  there as rows (asynchronous: the legacy SGD's scatter on the ps; synchronous: the worker's slot
  of each shard), and no tensor anywhere in the graph is as large as a table shard (no dense
  gradient of a table); the synchronous update on the ps reads no whole shard either;
- MultiWorkerMirrored reads its copy's rows sparsely, all-gathers them (values [rows, 8]) and
  all-reduces no table;
- Horovod all-gathers them, or with --horovod_sparse_as_dense all-reduces each table's gradient
  dense, whole (a tensor of the table's shape).

The paths hold with the compute emulated (--compute=emulated: a wait in place of the model, then
gradients of the rows the batch looks up): the strategy's protocol is the same."""
import pytest

from tfrun import task_records

pytestmark = pytest.mark.slow


def chief_graphs(clusters, scenario):
    chief = task_records(clusters[scenario].run)["chief_0"]
    return chief["step_graph"], chief.get("apply_graph")


def worker_graph(clusters, scenario):
    return task_records(clusters[scenario].run)["worker_0"]["step_graph"]


def on(graph, job):
    return {op.split("@")[0]: n for op, n in graph["row_ops"].items() if op.endswith(f"@{job}")}


@pytest.mark.parametrize("scenario", ["dlrm_ps_async", "dlrm_ps_sync", "dlrm_ps_async_emulated",
                                      "dlrm_ps_sync_emulated"])
def test_the_parameter_server_moves_rows_and_no_table_sized_tensor(clusters, scenario):
    step, apply = chief_graphs(clusters, scenario)
    assert [1000, 8] in step["table_shapes"]  # every table split in two shards of 1000 rows
    assert step["table_sized"] == {}, "a tensor as large as a table shard: a dense gradient or a whole read"
    on_ps, on_worker = on(step, "ps"), on(step, "worker")
    assert on_ps.get("ResourceGather")  # each shard's rows looked up where they live
    assert not any(op.startswith("Resource") for op in on_worker), on_worker  # no variable on the worker
    if scenario.startswith("dlrm_ps_async"):
        assert on_ps.get("ResourceScatterAdd")  # the legacy SGD's update: a scatter of the rows, on the ps
        assert apply is None
    else:
        assert on_ps.get("ResourceScatterNdUpdate")  # each shard's slot: the rows' ids and values
        assert "ResourceScatterAdd" not in on_ps  # no update from the worker
        assert apply["table_sized"] == {}, "the synchronous update read a whole shard"
        assert on(apply, "ps").get("ResourceScatterSub") and on(apply, "ps").get("ResourceGatherNd")
    assert step["collectives"] == {}


@pytest.mark.parametrize("scenario", ["dlrm_mwms", "dlrm_mwms_emulated"])
def test_multi_worker_mirrored_all_gathers_the_rows(clusters, scenario):
    graph = worker_graph(clusters, scenario)
    assert graph["table_sized"] == {}, "a whole table read or reduced"
    assert on(graph, "worker").get("ResourceGather")  # its copy's rows, read sparsely
    gathers = graph["collectives"].get("CollectiveGatherV2", [])
    assert [[None, 8]] in gathers  # a table's rows: values of unknown count x 8 dims
    reduced = [shape for shapes in graph["collectives"].get("CollectiveReduceV2", []) for shape in shapes]
    assert [2000, 8] not in reduced and graph["table_shapes"] == [[2000, 8]]


@pytest.mark.parametrize("scenario,gathered", [("dlrm_horovod", True), ("dlrm_horovod_dense", False)])
def test_horovod_all_gathers_rows_or_all_reduces_the_tables_dense(clusters, scenario, gathered):
    graph = worker_graph(clusters, scenario)
    reduced = [shape for shapes in graph["collectives"].get("HorovodAllreduce", []) for shape in shapes]
    assert ("HorovodAllgather" in graph["collectives"]) == gathered
    assert ([2000, 8] in reduced) != gathered  # sparse_as_dense: each table's gradient, whole
    if gathered:
        assert graph["table_sized"] == {}
