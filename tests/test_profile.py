"""--profile: a TensorFlow profile of the measured window that TensorBoard's Profile plugin can
split into steps (one step marker per measured step, on every strategy's stepping task)."""
import glob
import os

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow


def step_markers(xplane_path: str, name: str = "train") -> list:
    """step_num of every step marker (a TraceMe named `name` with a step_num stat) in an XSpace."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xplane_path, "rb") as f:
        space.ParseFromString(f.read())
    steps = []
    for plane in space.planes:
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                if plane.event_metadata[event.metadata_id].name != name:
                    continue
                for stat in event.stats:
                    if stat_names.get(stat.metadata_id) == "step_num":
                        steps.append(stat.int64_value or stat.uint64_value)
    return steps


@pytest.mark.parametrize("scenario,task", [("hard_default", "worker_0"), ("ps_two_ps_forward", "chief_0"),
                                           ("mwms_ring_forward", "worker_1")])
def test_profile_has_one_step_marker_per_measured_step(clusters, scenario, task):
    """The default strategy, a parameter-server coordinator and an MWMS worker (shared runs with --profile)."""
    launched = clusters[scenario]
    assert launched.config["profile"] is True
    traces = glob.glob(os.path.join(launched.run, "tb", task, "plugins", "profile", "*", "*.xplane.pb"))
    assert traces, f"no profile written for {task}"
    steps = sorted(s for path in traces for s in step_markers(path))
    warmup, measured = launched.config["num_warmup_steps"], launched.config["num_steps"]
    assert steps == list(range(warmup, warmup + measured))


def test_profile_and_profile_steps_are_one_or_the_other():
    result = run_cli("--profile", "--profile_steps=1,2", "--dry_run")
    assert result.returncode == 2
    assert "--profile traces the measured window" in result.stderr
