"""Every entry point that imports TensorFlow in its own process keeps TensorFlow's C++ start-up
lines off the console, as tfbench does (tfbench.framework.quiet): TF_CPP_MIN_LOG_LEVEL does not
reach the lines its libraries log while loading ('I0000 ... oneDNN custom operations are on'), nor
'failed call to cuInit' on a machine without a GPU driver. Asked for (TF_CPP_MIN_LOG_LEVEL=0),
they are there: the filter, not the machine, is what keeps them out."""
import re

import pytest

from conftest import run_cli

# absl's C++ log line: severity and date, time, thread, file:line]; and its notice before set-up
CPP_LOG = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] |^WARNING: All log messages before absl::InitializeLog",
                     re.MULTILINE)


@pytest.mark.slow
def test_tools_data_prints_its_progress_and_no_tensorflow_start_up_line(tmp_path):
    proc = run_cli(f"--data_dir={tmp_path / 'set'}", "--num_examples=4", "--image_size=16", "--num_shards=1",
                   module="tools.data", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not CPP_LOG.search(proc.stderr), proc.stderr
    assert "tools.data: 4 images of 16x16 in 1 shards" in proc.stdout
    asked = run_cli(f"--data_dir={tmp_path / 'asked'}", "--num_examples=4", "--image_size=16", "--num_shards=1",
                    module="tools.data", timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert asked.returncode == 0 and CPP_LOG.search(asked.stderr), asked.stderr


@pytest.mark.slow
def test_a_run_that_checks_its_shards_prints_no_tensorflow_start_up_line(clusters):
    """tfbench itself: its shard check and its tasks import TensorFlow in processes of their own.
    The two runs of the session's tools.data set: the first checked its shards (a new set), the
    second found them checked."""
    for name in ("mwms_ring_forward", "horovod_fp16_hard"):
        launched = clusters[name]
        assert "TFRecord file(s) of" in launched.out, launched.out[-2000:]
        assert not CPP_LOG.search(launched.out + launched.err), launched.err[-2000:]
