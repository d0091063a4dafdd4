"""The numbers mean the same thing in every row: synchronous parameter servers aggregate and
apply on the ps (no |w| round trip through a worker, measured in bytes per global step over the
measured window), placement is pinned inside the traced step and evidenced at runtime for every
task, parameter-server workers included. The runs are the shared scenarios of tests/clusters.py."""
import pytest

from tfrun import cluster_record, task_records

pytestmark = pytest.mark.slow

CLASSES = 100_000  # the tiny model's dense layer then holds |w| = (8 + 1) x 100000 x 4 bytes
W_BYTES = 9 * CLASSES * 4


def test_sync_ps_moves_each_gradient_once_and_updates_on_the_ps(clusters):
    launched = clusters["ps_sync"]
    run, steps = launched.run, launched.steps
    assert launched.config["num_classes"] == CLASSES and launched.config["num_workers"] == 2
    resources = cluster_record(run)["resources"]
    assert "measured window" in resources["scope"] and "whole_process" in resources
    tasks = resources["tasks"]
    ps_tx = tasks["ps_0"]["net_tx_bytes_per_step"]
    # the ps sends each worker the weights once per global step: N x |w|
    assert 1.5 * W_BYTES < ps_tx < 3.0 * W_BYTES, ps_tx / W_BYTES
    for worker in ("worker_0", "worker_1"):
        tx, rx = tasks[worker]["net_tx_bytes_per_step"], tasks[worker]["net_rx_bytes_per_step"]
        # one gradient out, one pull in; applying on a worker added |w| in and 2 |w| out
        assert tx < 1.6 * W_BYTES and rx < 1.6 * W_BYTES, (worker, tx / W_BYTES, rx / W_BYTES)
    chief = task_records(run)["chief_0"]
    # the update's ops ran on the ps, by the coordinator's own placer log
    assert chief["placement"]["op_devices"].get("ps:0/CPU:0", 0) > 0
    assert chief["skipped_closures"] == 0 or chief["closures_per_worker"] == {"0": steps, "1": steps}


def test_ps_workers_record_where_their_ops_ran(clusters):
    tasks = task_records(clusters["ps_async"].run)
    for index in (0, 1):
        placed = tasks[f"worker_{index}"]["placement"]
        assert placed["op_devices_source"].startswith("placer log")
        ran = placed["op_devices"]
        # the worker's compute ran on the worker itself, its variable ops on the ps
        assert ran.get(f"worker:{index}/CPU:0", 0) > 0 and ran.get("ps:0/CPU:0", 0) > 0
        assert not any(d.startswith(f"worker:{1 - index}") for d in ran)


@pytest.mark.parametrize("scenario", ["hard_default", "horovod_fp16_hard"])
def test_hard_placement_pins_every_op_of_the_traced_step(clusters, scenario):
    run = clusters[scenario].run
    assert clusters[scenario].config["placement"] == "hard"
    placed = task_records(run)["worker_0"]["placement"]
    requested = placed["requested_op_devices"]
    assert requested and "unplaced" not in requested, requested  # TF2 drops outer scopes when tracing
    assert placed["op_devices_source"] == "run_metadata" and set(placed["op_devices"]) == {"CPU:0"}
    assert placed["hard_and_soft_can_differ"] is False and "cannot differ" in placed["note"]


@pytest.mark.parametrize("scenario", ["ps_async_straggler_hard", "ps_sync_straggler_hard"])
def test_hard_placement_runs_parameter_server_steps_on_the_dispatched_worker(clusters, scenario):
    """The strategy's partial replica device used to make hard placement fail at the first
    closure; now every op of each worker's step ran on that worker or on the ps."""
    tasks = task_records(clusters[scenario].run)
    for index in (0, 1):
        placed = tasks[f"worker_{index}"]["placement"]
        assert placed["placement"] == "hard" and placed["op_devices_source"].startswith("placer log")
        ran = placed["op_devices"]
        assert ran.get(f"worker:{index}/CPU:0", 0) > 0, ran
        assert set(ran) <= {f"worker:{index}/CPU:0", "ps:0/CPU:0"}, ran


@pytest.mark.parametrize("mode,scenario", [("forward", "mwms_ring_forward"), ("train", "mwms")])
def test_forward_steps_never_communicate_between_workers(clusters, mode, scenario):
    """MWMS used to all-reduce the loss in forward mode while Horovod did not."""
    assert clusters[scenario].config["mode"] == mode
    for name, record in task_records(clusters[scenario].run).items():
        if mode == "forward":
            assert record["step_collective_ops"] == 0, name
        else:  # the gradients' all-reduce is the strategy's own
            assert record["step_collective_ops"] > 0, name
