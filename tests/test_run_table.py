"""The run table's rates can be checked from what it prints: cluster images/sec and a parameter
server's updates per second divide by one and the same measured window, printed with enough
digits to redo both divisions."""
import re

import pytest

from tfbench.config import RunConfig
from tfbench.results import records, table

T0 = 1_700_000_000.0


def ps_run():
    """Two asynchronous workers, 3 updates of 4 images each; the coordinator's rounds (the
    cluster's step series) are longer than the workers' window, as they are in real runs."""
    tasks = []
    for index, offset in ((0, 0.0), (1, 0.004)):
        times = [0.0151, 0.0163, 0.0158]
        starts = [T0 + offset + sum(times[:k]) for k in range(3)]
        tasks.append(records.task_record(run_id="r", role="worker", index=index, examples_per_step=4,
                                         step_times_s=times, step_start_wall=starts, extra={"replicas": 2}))
    rounds = [0.0221, 0.0229, 0.0227]
    tasks.append(records.task_record(
        run_id="r", role="chief", index=0, examples_per_step=8, step_times_s=rounds,
        step_start_wall=[T0 - 0.01 + sum(rounds[:k]) for k in range(3)],
        extra={"counts_toward_cluster": False, "cluster_steps": True, "step_label": "2 updates", "updates": 6,
               "updates_per_sec_of_rounds": 6 / sum(rounds)}))
    return tasks


def test_images_and_updates_per_second_share_one_printed_window():
    tasks = ps_run()
    cluster = records.cluster_record("r", tasks)
    assert cluster["updates_per_sec"] == pytest.approx(6 / cluster["window_s"])
    config = RunConfig(model="tiny", strategy="parameter_server", num_workers=2, batch_size=4, num_steps=3)
    out = table.render(config, cluster, tasks)
    images = re.search(r"cluster images/sec = (\d+) images / ([\d.]+) s measured window = ([\d.]+)", out)
    updates = re.search(r"updates: (\d+) parameter-server updates applied in the same measured window = "
                        r"(\d+) / ([\d.]+) s = ([\d.]+) per second", out)
    assert images and updates, out
    assert images.group(2) == updates.group(3)  # one window, printed once for both
    window = float(images.group(2))
    assert int(images.group(1)) / window == pytest.approx(float(images.group(3)), abs=0.06)
    assert int(updates.group(2)) / window == pytest.approx(float(updates.group(4)), abs=0.06)
    assert float(updates.group(4)) * 4 == pytest.approx(float(images.group(3)), abs=0.3)  # 4 images per update


def test_an_update_whose_pull_alone_took_longer_shows_no_made_up_compute():
    split = {"updates": 3, "pull_and_compute_s": 0.015, "push_s": 0.01, "wait_s": 0.001}
    line = table.time_split_line([
        {"index": 0, "time_split": dict(split, pull_s=0.02, compute_s=0.0)},
        {"index": 1, "time_split": dict(split, pull_s=0.005, compute_s=0.01)}])
    assert "worker_0 pull+compute 15.0 (the pull alone took 20.0) + push 10.0 + wait 1.0" in line
    assert "worker_1 pull 5.0 + compute 10.0 + push 10.0 + wait 1.0" in line
    assert "compute 0.0" not in line
