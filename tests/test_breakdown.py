"""Where each global step's time goes (tfbench.measure.breakdown, strategies.parameter_server.split): the
parts from known timestamps, the sum check, the record without timestamps, and the TensorBoard
series; no TensorFlow."""
import os

import pytest

from strategies.parameter_server import split as ps_split
from tfbench.measure import breakdown
from tfbench.results.rundir import RunDir
from tfbench.tensorboard import step_split


def rank(starts, durations, done):
    return {"kind": "task", "role": "worker", "step_start_wall": starts, "step_times_s": durations,
            "step_computed_wall": done}


def test_sync_parts_from_the_ranks_timestamps_sum_to_the_global_step():
    # step 0: rank 0 starts at 100.0, gradients at 100.3, ends 101.0; rank 1 starts 100.1, gradients
    # 100.5 (slower), ends 101.0: compute = mean(0.3, 0.4) = 0.35; waiting = 100.5 - 100.0 - 0.35;
    # communication = 101.0 - 100.5; global step = 1.0
    r0 = rank([100.0, 102.0], [1.0, 0.5], [100.3, 102.2])
    r1 = rank([100.1, 102.0], [0.9, 0.5], [100.5, 102.2])
    split = breakdown.sync_ranks([r0, r1], peers=True)
    per = split["per_step_s"]
    assert per["compute"][0] == pytest.approx(0.35) and per["waiting"][0] == pytest.approx(0.15)
    assert per["communication"][0] == pytest.approx(0.5) and per["apply"] == [0.0, 0.0]
    assert split["step_s"] == pytest.approx([1.0, 0.5]) and split["step_start_wall"] == [100.0, 102.0]
    assert per["compute"][1] == pytest.approx(0.2) and per["waiting"][1] == pytest.approx(0.0)
    assert split["sum_check"]["residual_mean_s"] == pytest.approx(0.0, abs=1e-12) and split["sum_check"]["within"]
    assert split["mean_s"]["communication"] == pytest.approx(0.4)
    assert "tf.timestamp" in split["methods"]["compute"] and "measured" in split["methods"]["waiting"]


def test_one_task_without_peers_is_all_compute():
    split = breakdown.sync_ranks([rank([1.0], [0.2], [1.15])], peers=False)
    assert split["per_step_s"]["compute"] == [pytest.approx(0.2)]
    assert split["per_step_s"]["communication"] == [0.0] and "no peers" in split["methods"]["communication"]


def test_records_without_timestamps_say_why():
    xla = rank([1.0], [0.2], [0.0])  # a step compiled whole by XLA stamps 0
    assert breakdown.sync_ranks([xla], peers=False) is None
    record = breakdown.of_run([dict(xla, step_computed_wall=None)], [0.2])
    assert record["source"] == "none" and "XLA" in record["note"]
    assert "XLA" in breakdown.line(record)


class Step:
    def __init__(self, duration_s, start_wall=10.0):
        self.duration_s, self.start_wall = duration_s, start_wall


def test_parameter_server_steps_split_into_pull_compute_push_apply_and_waiting():
    closures = [{"round": 5, "worker": 0, "start": 10.0, "computed": 12.5, "end": 14.0},
                {"round": 5, "worker": 1, "start": 10.0, "computed": 12.7, "end": 14.2}]
    pulls = ps_split.pull_medians([{"worker": 0, "start": 0, "end": 2.0}, {"worker": 0, "start": 0, "end": 2.2},
                                   {"worker": 0, "start": 0, "end": 9.0}, {"worker": 1, "start": 0, "end": 2.2}])
    assert pulls == {0: pytest.approx(2.2), 1: pytest.approx(2.2)}
    split = ps_split.global_steps(closures, [Step(5.0)], 5, pulls, apply_s=[0.3])
    per = split["per_step_s"]
    assert per["pull"] == [pytest.approx(2.2)] and per["compute"] == [pytest.approx(2.6 - 2.2)]
    assert per["push"] == [pytest.approx(1.5)] and per["communication"] == [pytest.approx(3.7)]
    assert per["apply"] == [0.3] and per["waiting"] == [pytest.approx(5.0 - 0.4 - 3.7 - 0.3)]
    assert "measured" in split["methods"]["apply"]
    summary = breakdown.summarise(per, [5.0], split["methods"], split["source"], [10.0])
    assert summary["sum_check"]["within"] and summary["mean_s"]["pull"] == pytest.approx(2.2)
    asynchronous = ps_split.global_steps(closures, [Step(5.0)], 5, pulls, apply_s=None, workers=2)
    assert asynchronous["per_step_s"]["apply"] == [0.0] and "inside push" in asynchronous["methods"]["apply"]
    assert ps_split.global_steps(closures, [Step(5.0)], 5, {}, None) is None  # no probe: no split


def test_a_closure_splits_into_input_pull_compute_and_push():
    closure = {"start": 10.0, "input": 10.5, "computed": 12.0, "end": 12.4}
    assert ps_split.phases(closure, 1.0) == {"input": (10.0, 10.5), "pull": (10.5, 11.5), "compute": (11.5, 12.0),
                                             "push": (12.0, 12.4)}
    # a probe's pull longer than the closure's batch-to-gradients: the pull is what the closure had, no compute
    assert ps_split.phases(closure, 3.0)["pull"] == (10.5, 12.0) and ps_split.phases(closure, 3.0)["compute"] == (12.0, 12.0)
    sync = ps_split.global_steps([dict(closure, round=0, worker=0)], [Step(3.0)], 0, {0: 1.0}, apply_s=[0.2])
    per = sync["per_step_s"]
    assert per["input"] == [0.5] and per["pull"] == [1.0] and per["compute"] == [0.5] and per["push"] == [pytest.approx(0.4)]
    assert per["waiting"] == [pytest.approx(3.0 - 0.5 - 1.0 - 0.5 - 0.4 - 0.2)]
    worker = ps_split.split([closure], [{"start": 0.0, "end": 1.0}], window_s=4.0)
    assert worker["input_s"] == 0.5 and worker["pull_and_compute_s"] == 1.5 and worker["compute_s"] == 0.5
    assert worker["window_share"]["input"] == pytest.approx(0.125) and worker["wait_s"] == pytest.approx(4.0 - 2.4)


# docs/network.md's latency example (asynchronous ps, lenet 32 px, 2 workers, separate ps, 100 Mbit,
# --link_latency=50 --link_jitter=5), as tfbench 8aaf68d recorded it on 2026-11-27, in seconds from the
# first round's start: the coordinator's rounds (2 updates each) and each worker's closures (start,
# end) with its recorded mean push and median pull-only closure. The rounds alternate between ~2.4 s
# and ~3 ms: all 30 closures were queued at once, a fast worker_0 finished the next round's closures
# while the previous round waited for worker_1, so that round's fetch found them done. Charged with
# its own closures' times, a 3 ms round got ~540 ms of parts and its waiting (never below 0) stayed
# 0, while the long rounds kept their waiting: the step split added up to 1432.9 of 1232.8 ms (16%
# over; the run of the same example, 22%).
ROUNDS = [(0.0, 2.463), (2.463, 0.003), (2.466, 2.432), (4.898, 0.002), (4.9, 0.538), (5.438, 1.873),
          (7.312, 0.125), (7.437, 2.489), (9.926, 0.003), (9.929, 2.399)]
WORKER_0 = [(0.011, 0.515), (0.636, 1.14), (1.335, 1.839), (1.958, 2.465), (2.585, 3.11), (3.231, 3.749),
            (3.969, 4.68), (4.811, 5.32), (5.441, 5.949), (6.171, 6.684), (6.793, 7.317), (7.44, 7.96),
            (8.075, 8.591), (8.776, 9.299), (9.411, 9.928)]
WORKER_1 = [(0.067, 0.653), (2.52, 3.083), (4.953, 5.492), (7.368, 8.089), (9.982, 10.514)]
PUSH = {0: 0.262, 1: 0.3038}
PULL = {0: 0.1513, 1: 0.1632}


def test_latency_example_rounds_add_up_when_parts_are_the_workers_time_inside_each_round():
    closures = [{"worker": w, "start": a, "input": a, "computed": b - PUSH[w], "end": b}
                for w, spans in ((0, WORKER_0), (1, WORKER_1)) for a, b in spans]
    steps = [Step(d, a) for a, d in ROUNDS]
    split = ps_split.global_steps(closures, steps, 5, PULL, apply_s=None, workers=2)
    summary = breakdown.summarise(split["per_step_s"], [d for _, d in ROUNDS], split["methods"], split["source"],
                                  [a for a, _ in ROUNDS])
    assert summary["sum_check"]["within"] and summary["sum_check"]["relative"] < 1e-9
    per = split["per_step_s"]
    for i, (_, d) in enumerate(ROUNDS):  # every round, the 3 ms ones too, holds exactly its own time
        parts = sum(per[p][i] for p in ("compute", "communication", "input", "apply", "waiting"))
        assert parts == pytest.approx(d) and per["waiting"][i] >= 0
    # over the window the parts are the workers' busy time: 20 closures' pull + compute + push, halved
    busy = sum(b - a for a, b in WORKER_0 + WORKER_1)
    assert sum(per["compute"]) + sum(per["communication"]) == pytest.approx(busy / 2, rel=0.01)


def test_sync_input_is_the_wait_for_the_batch_and_input_bound_runs_say_so():
    # rank 0: start 100.0, batch 100.4, gradients 100.6, end 101.0; rank 1: 100.0, 100.2, 100.5, 101.0
    r0 = dict(rank([100.0], [1.0], [100.6]), step_input_wall=[100.4])
    r1 = dict(rank([100.0], [1.0], [100.5]), step_input_wall=[100.2])
    split = breakdown.of_run([r0, r1], [1.0])
    mean = split["mean_s"]
    assert mean["input"] == pytest.approx(0.3) and mean["compute"] == pytest.approx(0.25)
    assert mean["waiting"] == pytest.approx(0.6 - 0.3 - 0.25) and mean["communication"] == pytest.approx(0.4)
    assert split["sum_check"]["relative"] == pytest.approx(0.0, abs=1e-9) and "input 300.0" in breakdown.line(split)
    assert not breakdown.input_dominates(split)
    alone = breakdown.of_run([dict(rank([1.0], [1.0], [1.9]), step_input_wall=[1.7])], [1.0])
    assert alone["mean_s"]["input"] == pytest.approx(0.7) and alone["mean_s"]["compute"] == pytest.approx(0.3)
    assert breakdown.input_dominates(alone) and "input-bound" in breakdown.line(alone)
    # a record of an older tfbench has no batch marks: its input is counted in compute, as it was
    old = breakdown.of_run([rank([1.0], [1.0], [1.9])], [1.0])
    assert old["mean_s"]["input"] == 0.0 and old["mean_s"]["compute"] == pytest.approx(1.0)


def test_table_line_and_tensorboard_series(tmp_path):
    r0 = rank([100.0, 102.0], [1.0, 0.5], [100.3, 102.2])
    r1 = rank([100.1, 102.0], [0.9, 0.5], [100.5, 102.2])
    split = breakdown.of_run([r0, r1], [1.0, 0.5])
    text = breakdown.line(split)
    assert text.startswith("step split, ms per global step") and "compute 275.0" in text
    run = RunDir(str(tmp_path / "run"))
    os.makedirs(run.tb_dir)
    run.write_json("config.json", {})
    assert step_split.write(run, {"step_breakdown": split}) == 2
    from tensorboard.backend.event_processing import event_accumulator

    events = event_accumulator.EventAccumulator(run.task_tb("cluster"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"split/compute_ms", "split/communication_ms", "split/waiting_ms"} <= tags
    top = [e.value for e in events.Scalars("split_stacked/3_compute+communication+waiting_ms")]
    assert top == pytest.approx([1000.0, 500.0]) == [e.value for e in events.Scalars("split_stacked/step_ms")]
    assert step_split.write(run, {"step_breakdown": {"source": "none"}}) == 0


def test_a_pull_that_started_beside_the_batch_is_charged_after_it_only_for_what_the_wait_did_not_hide():
    """An unbounded asynchronous closure reads its weights as it starts: of a 5 ms pull, a 4 ms wait
    for the batch hid 4 ms, so 1 ms of the 6 ms from batch to gradients is pull and 5 ms compute
    (a closure whose reads waited for the batch: 5 ms pull, 1 ms compute)."""
    closure = {"start": 0.0, "input": 0.004, "computed": 0.010, "end": 0.012, "worker": 0}
    probes = [{"start": 0.0, "end": 0.005, "worker": 0}]
    beside = ps_split.split([closure], probes, window_s=0.012, beside=True)
    after = ps_split.split([closure], probes, window_s=0.012)
    assert beside["compute_s"] == pytest.approx(0.005) and after["compute_s"] == pytest.approx(0.001)
    assert ps_split.phases(closure, 0.005, beside=True)["pull"] == pytest.approx((0.004, 0.005))
    assert ps_split.phases(closure, 0.005)["pull"] == pytest.approx((0.004, 0.009))
