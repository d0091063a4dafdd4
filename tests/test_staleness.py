"""Staleness of parameter-server updates, measured with a version counter on the ps: asynchronous
workers apply gradients computed on parameters that others have updated since (staleness > 0
occurs); synchronous ones never do (0 for every gradient). The runs are the shared `ps_async` and
`ps_sync` of tests/clusters.py. The counter counts an update once its writes are done: the marks it
waits on, one per ps (strategies.parameter_server.ops.written), traced."""
import os

import pytest

from strategies.parameter_server import staleness
from strategies.parameter_server.ops import written
from tfrun import cluster_record, scalars, task_records


def test_summary_per_worker_and_overall():
    stats = staleness.by_worker([(0, 0), (0, 2), (1, 1), (1, 1), (0, 0)])
    assert stats["all"] == {"updates": 5, "max": 2, "mean": 0.8, "histogram": {"0": 2, "1": 2, "2": 1}}
    assert stats["worker_0"]["max"] == 2 and stats["worker_1"]["histogram"] == {"1": 2}
    assert staleness.summary([]) == {"updates": 0}


class Sharded:
    """Stands for a ShardedVariable: its shards are `variables`."""

    def __init__(self, parts):
        self.variables = parts


@pytest.mark.slow
def test_one_mark_per_ps_waits_for_the_writes_of_every_part_there():
    from tfbench.framework.tf_import import tf

    ps = ["/job:ps/task:0/device:CPU:0", "/job:ps/task:1/device:CPU:0"]
    with tf.Graph().as_default():
        def on(device, name):
            with tf.device(device):
                return tf.Variable(tf.zeros([4, 2]), name=name)

        table = Sharded([on(ps[0], "t0"), on(ps[1], "t1")])
        dense = on(ps[0], "w")

        @tf.function
        def step():
            for v in (*table.variables, dense):
                v.assign_add(tf.ones([4, 2]), read_value=False)
            with tf.control_dependencies(written([table, dense])):
                return tf.constant(0)

        graph = step.get_concrete_function().graph
        marks = [op for op in graph.get_operations() if op.type == "NoOp" and op.device in ps]
        assert sorted(op.device for op in marks) == ps  # one per ps, where its parts live
        for mark in marks:
            shapes = mark.control_inputs
            assert {op.type for op in shapes} == {"VariableShape"}
            assert {op.device for op in shapes} == {mark.device}
            writes = {w.type for op in shapes for w in op.control_inputs}
            assert writes == {"AssignAddVariableOp"}  # each shape waits for its part's write
        assert sorted(len(mark.control_inputs) for mark in marks) == [1, 2]  # ps 0: a shard and w


@pytest.mark.slow
def test_async_updates_are_stale_and_logged_per_update(clusters):
    launched = clusters["ps_async"]
    run, updates = launched.run, 2 * launched.steps  # rounds of 2 updates
    assert launched.steps >= 15 and not launched.config["ps_sync"]
    tasks = task_records(run)
    stats = tasks["chief_0"]["staleness"]
    assert stats["all"]["updates"] == updates
    assert stats["all"]["max"] >= 1, stats  # two workers interleave: some update lands on newer weights
    assert min(int(k) for k in stats["all"]["histogram"]) >= 0
    chief = tasks["chief_0"]  # updates per second over the coordinator's measured rounds
    assert chief["updates"] == updates
    # no hook between rounds: every record was kept on its worker and read back, none lost
    assert chief["closure_records"].startswith("kept on the workers") and chief["closure_results_lost"] == 0
    assert sum(chief["closures_per_worker"].values()) == updates
    assert chief["updates_per_sec_of_rounds"] == pytest.approx(updates / sum(chief["step_times_s"]), rel=1e-6)
    cluster = cluster_record(run)  # the cluster's: over the window of images/sec
    assert cluster["updates_per_sec"] == pytest.approx(updates / cluster["window_s"], rel=1e-6)
    for index in (0, 1):
        worker = tasks[f"worker_{index}"]
        assert len(worker["staleness_per_update"]) == worker["num_measured_steps"]
        events = scalars(os.path.join(run, "tb", f"worker_{index}"))
        assert [e.value for e in events["perf/staleness"]] == worker["staleness_per_update"]


@pytest.mark.slow
def test_sync_updates_are_never_stale(clusters):
    launched = clusters["ps_sync"]
    out, steps = launched.out, launched.steps
    stats = task_records(launched.run)["chief_0"]["staleness"]
    assert stats["all"] == {"updates": 2 * steps, "max": 0, "mean": 0.0, "histogram": {"0": 2 * steps}}
    assert "staleness (updates the ps applied" in out and "max 0" in out
    # one update per step
    assert f"updates: {steps} parameter-server updates applied in the same measured window = {steps} / " in out



def _ancestors(op):
    """Every op `op` waits for, through data and control edges."""
    seen, todo = {}, [op]
    while todo:
        for parent in [t.op for t in todo[-1].inputs] + list(todo.pop().control_inputs):
            if parent.name not in seen:
                seen[parent.name] = parent
                todo.append(parent)
    return seen.values()


@pytest.mark.slow
@pytest.mark.parametrize("optimizer_name", ["sgd", "sgd_v2"])
def test_an_async_update_reads_beside_its_batch_and_counts_after_the_optimizer(optimizer_name):
    """The traced closure (a small recommender, one device): the version counter and every dense
    weight are read as the closure starts, waiting for no batch and no other read, as TensorFlow's
    tutorial step reads; the count waits for every write of the update: through the legacy
    optimizer's own count of it, or (the v2 optimizer's count waits for none) through a mark of
    every part. A bound's gate sits in a cond: its order is checked by its cluster test."""
    import types

    from tfbench.config import RunConfig
    from tfbench.framework.tf_import import tf
    from tfbench.loop import steps
    from strategies.parameter_server.asynchronous import worker_step

    config = RunConfig(model="dlrm", batch_size=4, embedding_tables=2, embedding_rows=50, embedding_dim=4,
                       optimizer=optimizer_name)
    model = config.workload.build(config)
    optimizer = steps.optimizer(config)
    adapter = types.SimpleNamespace(config=config, model=model, optimizer=optimizer, device="/device:CPU:0",
                                    strategy=tf.distribute.get_strategy(), num_workers=2)
    features, labels = config.workload.batch(config, config.batch_size)
    data = tf.data.Dataset.from_tensors((features, labels, tf.constant(0, tf.int32))).repeat()
    step = worker_step(adapter)  # held: it holds the version counter the graph reads
    graph = step.get_concrete_function(iter(data)).graph
    inner = {id(outer): placeholder.op for outer, placeholder in graph.captures}

    def uses(variable, kind):
        handle = inner[id(variable.handle)]
        return [op for op in graph.get_operations() if op.type == kind and op.inputs[0].op is handle]

    version = next(v for v in graph.variables if v.name.startswith("update_version"))
    dense = [v for v in model.trainable_variables if "table" not in v.name]
    tables = [v for v in model.trainable_variables if "table" in v.name]
    assert len(dense) >= 10 and len(tables) == 2
    (count,) = uses(version, "AssignAddVariableOp")
    (read,) = [op for op in uses(version, "ReadVariableOp")  # the other is the count's value
               if count.name not in {parent.name for parent in _ancestors(op)}]
    weight_reads = [op for v in dense for op in uses(v, "ReadVariableOp")]
    assert len(weight_reads) >= len(dense)
    for op in [read] + weight_reads:
        waits = {parent.type for parent in _ancestors(op)}
        assert waits <= {"Placeholder"}, (op.name, waits)  # no batch, no counter: they start the closure
    before = {parent.name for parent in _ancestors(count)}
    looks = {"ReadVariableOp", "ResourceGather", "VariableShape"}
    for v in model.trainable_variables:  # dense weights whole, tables by rows
        writes = [op for op in graph.get_operations()
                  if op.type not in looks and op.inputs and op.inputs[0].op is inner[id(v.handle)]]
        assert writes and all(op.name in before for op in writes), (v.name, [op.type for op in writes])
    if optimizer_name == "sgd":  # the optimizer's own count, which the v2 one makes after no write
        (optimizer_count,) = uses(optimizer.iterations, "AssignAddVariableOp")
        assert optimizer_count.name in before
