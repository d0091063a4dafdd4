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


def test_parameter_server_steps_split_into_pull_compute_push_apply_and_waiting():
    class Step:
        def __init__(self, duration_s):
            self.duration_s = duration_s

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
    asynchronous = ps_split.global_steps(closures, [Step(5.0)], 5, pulls, apply_s=None)
    assert asynchronous["per_step_s"]["apply"] == [0.0] and "inside push" in asynchronous["methods"]["apply"]
    assert ps_split.global_steps(closures, [Step(5.0)], 5, {}, None) is None  # no probe: no split


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
