"""Every strategy through the local launcher on the tiny model: the right tasks report, the
cluster record adds up, placement is recorded, and parameter servers do the updates they should.
The runs are the shared scenarios of tests/clusters.py; the step counts come from each run's config."""
import os

import pytest

from tfbench.tensorboard import timeline
from tfrun import cluster_record, scalars, task_records

pytestmark = pytest.mark.slow

BATCH = 4

CASES = {
    # name: (scenario of tests/clusters.py, measuring tasks, replicas)
    "mirrored": ("mirrored", ["worker_0"], 2),
    "mwms": ("mwms", ["worker_0", "worker_1"], 2),
    "mwms_ring_forward": ("mwms_ring_forward", ["worker_0", "worker_1"], 2),
    "ps_async_two_ps_separate": ("ps_async", ["worker_0", "worker_1"], 2),
    "ps_sync_separate": ("ps_sync", ["worker_0", "worker_1"], 2),
    "ps_two_ps_forward": ("ps_two_ps_forward", ["worker_0", "worker_1"], 2),
    "horovod": ("horovod_fp16_hard", ["worker_0", "worker_1"], 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_strategy_runs_through_the_launcher(clusters, case):
    scenario, measuring, replicas = CASES[case]
    launched = clusters[scenario]
    out, run, config, steps = launched.out, launched.run, launched.config, launched.steps
    tasks = task_records(run)
    counted = sorted(n for n, r in tasks.items() if r.get("counts_toward_cluster", True))
    assert counted == measuring
    # asynchronous ps: a step goes to whichever worker is free, so only the total is fixed
    fixed_per_worker = not (config["strategy"] == "parameter_server" and not config["ps_sync"])
    measured = [tasks[name]["num_measured_steps"] for name in measuring]
    assert sum(measured) == steps * len(measuring)
    for name in measuring:
        r = tasks[name]
        assert len(r["step_times_s"]) == r["num_measured_steps"]
        if fixed_per_worker:
            assert r["num_measured_steps"] == steps
        assert r["replicas"] == replicas and r["batch_size"] == BATCH
        assert r["global_batch_size"] == BATCH * replicas
        assert r["images_per_sec"] > 0
    cluster = cluster_record(run)
    assert cluster["status"] == "ok"
    assert cluster["images"] == BATCH * replicas * steps
    split = cluster["step_breakdown"]  # compute + communication + input + apply + waiting = the step, within 5%
    assert split["sum_check"]["within"], (split["sum_check"], split["mean_s"])
    assert cluster["num_workers"] == len(measuring)

    placed = [r["placement"] for r in tasks.values() if r.get("placement")]
    assert placed, "no task recorded its placement"
    for p in placed:
        assert p["op_devices"] and p["variable_devices"]
    assert "cluster" in out


@pytest.mark.parametrize("scenario", ["mwms", "mwms_ring_forward"])
def test_mwms_workers_leave_together_once_every_workers_records_are_written(clusters, scenario):
    """No MWMS worker exits while another still runs: one that did would abort the other's
    collectives (its last all-reduce's pull, worker 0's coordination service). Worker 0, which hosts
    the service, leaves last, once every worker wrote its records and passed the barrier; another
    worker's last answer from the service may be lost with it (its log then says its wait ended
    early), when nothing of its own is left to do."""
    import json
    import re

    run = clusters[scenario].run
    done, logs = {}, {}
    for name in ("worker_0", "worker_1"):
        with open(os.path.join(run, "tasks", f"{name}.progress")) as f:
            progress = json.load(f)
        assert progress["phase"] == "done"
        done[name] = progress["time"]
        with open(os.path.join(run, "tasks", f"{name}.log")) as f:
            logs[name] = f.read()
    left = re.findall(r"tfbench: worker_0 leaves with every worker's records written, at ([0-9.]+)", logs["worker_0"])
    assert len(left) == 1, "worker 0, which hosts the coordination service, never passed the exit barrier"
    assert float(left[0]) >= max(done.values()), (done, left)
    assert re.search(r"tfbench: worker_1( leaves with every worker's records written|'s wait for the other "
                     r"workers ended early)", logs["worker_1"]), "worker_1 never reached the exit barrier"


def test_async_ps_does_workers_times_steps_updates(clusters):
    launched = clusters["ps_async"]
    steps, tasks = launched.steps, task_records(launched.run)
    chief = tasks["chief_0"]
    assert chief["counts_toward_cluster"] is False
    assert chief["updates"] == 2 * steps  # the measured window's updates; warm-up is not counted
    # asynchronous: a closure goes to whichever worker is free, so only the total is fixed
    assert sum(chief["closures_per_worker"].values()) == 2 * steps
    # two ps: the variables are spread over both
    assert set(chief["placement"]["variable_devices"]) == {"ps:0/CPU:0", "ps:1/CPU:0"}


def test_sync_ps_does_one_update_per_global_step(clusters):
    launched = clusters["ps_sync"]
    run, steps = launched.run, launched.steps
    tasks = task_records(run)
    chief = tasks["chief_0"]
    assert chief["updates"] == steps  # measured window only
    assert chief["closures_per_worker"] == {"0": steps, "1": steps}
    assert len(chief["apply_step_s"]) == steps
    assert chief["update_location"].startswith("ps")
    # the cluster's series is the coordinator's global step: one sample per step, not per worker
    cluster = cluster_record(run)
    assert cluster["step_times_s"] == chief["step_times_s"] and cluster["stats"]["count"] == steps
    assert "global step" in cluster["step_definition"]
    for name in ("worker_0", "worker_1"):
        worker = tasks[name]
        assert worker["step_label"] == "gradient push" and len(worker["wait_s"]) == steps
        # a worker's record is about the worker, not the coordinator that wrote it
        assert worker["pid"] != chief["pid"] and worker["pid"] > 0
        assert worker["cores"] != chief["cores"] or worker["shares_cores_with"]


def test_two_worker_run_logs_sys_and_perf_per_task(clusters):
    """The monitor's series beside the step times, for every task of a 2-worker run."""
    # synchronous, so that every worker does exactly one closure per step
    launched = clusters["ps_sync"]
    run, steps = launched.run, launched.steps
    assert launched.config["monitor_interval"] <= 0.25
    tb = os.path.join(run, "tb")
    for task in ("worker_0", "worker_1", "chief_0", "ps_0"):
        events = scalars(os.path.join(tb, task))
        assert max(e.value for e in events["sys/cpu_percent"]) > 0, task
        assert max(e.value for e in events["sys/rss_mb"]) > 100, task
        assert "sys/net_tx_mb_total" in events and "sys/net_rx_mb_total" in events
        if task != "ps_0":
            assert len(events["perf/step_time_ms"]) == steps, task
    assert "sys/cpu_percent" in scalars(os.path.join(tb, "workers_mean"))
    # perf/* and sys/* share one step axis: milliseconds since the run began
    origin = timeline.origin(run)
    worker = scalars(os.path.join(tb, "worker_0"))
    for tag in ("perf/step_time_ms", "sys/cpu_percent"):
        assert all(abs(e.step - (e.wall_time - origin) * 1000) <= 1 for e in worker[tag]), tag
    sys_steps = [e.step for e in worker["sys/cpu_percent"]]
    assert min(sys_steps) <= min(e.step for e in worker["perf/step_time_ms"]) <= max(sys_steps)
    resources = cluster_record(run)["resources"]["tasks"]
    # the ps serves both workers: it receives their gradients
    assert resources["ps_0"]["net_rx_bytes"] > 0 and resources["worker_0"]["net_tx_bytes"] > 0
