"""One TensorBoard step axis for every series of a run (tfbench.tensorboard.timeline)."""
import os

from tfbench.tensorboard import timeline


def test_steps_are_milliseconds_since_config_was_written(tmp_path):
    config = tmp_path / "config.json"
    config.write_text("{}")
    os.utime(config, (1000.0, 1000.0))
    origin = timeline.origin(str(tmp_path))
    assert origin == 1000.0
    assert timeline.step_ms(origin, 1002.5) == 2500
    # a sample and a step end at the same instant land on the same step, whoever writes them
    assert timeline.step_ms(timeline.origin(str(tmp_path)), 1003.0) == timeline.step_ms(origin, 1003.0)
    assert timeline.step_ms(origin, 999.0) == 0  # never negative
