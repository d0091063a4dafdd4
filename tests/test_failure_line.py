"""A task that fails at run time: the run's one line names the task and its error's informative
line (tfbench.framework.error_line: never 'Graph execution error:'), in the printed failure, the
cluster record's reason and a sweep's; the run directory keeps the task's whole log. The failures
are real: a shard whose first records parse and whose later bytes are garbage (tf.data's
DataLossError, under MWMS), and labels beyond --num_classes after the first records the check
reads (the loss's InvalidArgumentError) under a parameter server, whose closures' errors surface on
the chief, and under Horovod, whose horovodrun names the first rank that failed."""
import os
import re

import imagenet_records
import pytest

from conftest import TINY, run_cli
from tfrun import records

FIRST_CHECKED = 256  # tfbench.data.shards reads this many records of a one-shard set


def failed_run(logdir, run_id, data_dir, *flags):
    """(stderr, the failed cluster record, the run directory) of a run that must fail at run time."""
    proc = run_cli(*TINY, f"--data_dir={data_dir}", f"--logdir={logdir}", f"--run_id={run_id}", "--stall_timeout=120",
                   *flags, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    run = os.path.join(logdir, run_id)
    (cluster,) = [r for r in records(run) if r["kind"] == "cluster"]
    assert cluster["status"] == "failed"
    assert f"tfbench: run failed: {cluster['reason']}\n" in proc.stderr  # the one line, as recorded
    return proc.stderr, cluster, run


@pytest.fixture(scope="module")
def bad_sets(tmp_path_factory):
    """A set whose shard turns to garbage after the records tfbench checks before starting, and one
    labelled beyond --num_classes=10 from there on: written by one child process."""
    root = tmp_path_factory.mktemp("bad")
    corrupt, labels = imagenet_records.written_sets([
        (root / "corrupt", "--examples=300", "--size=16", "--labels=0:9", f"--garbage_after={FIRST_CHECKED + 4}"),
        (root / "labels", "--examples=1200", "--size=16", "--labels=0:9", f"--bad_labels={FIRST_CHECKED}:50")])
    return {"corrupt": corrupt, "labels": labels}


@pytest.mark.slow
def test_a_corrupted_record_names_the_task_and_the_record(bad_sets, logdir):
    data = bad_sets["corrupt"]
    _, cluster, run = failed_run(logdir, "corrupt", data, "--strategy=multi_worker_mirrored", "--num_workers=2")
    assert re.fullmatch(r"worker_\d: DataLossError: corrupted record at \d+", cluster["reason"]), cluster["reason"]
    with open(os.path.join(run, "tasks", f"{cluster['failed_task']}.log")) as f:
        assert "Traceback (most recent call last)" in f.read()  # the whole log stays in the run directory


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["parameter_server", "horovod"])
def test_a_label_beyond_num_classes_names_the_loss_error_not_graph_execution(bad_sets, logdir, strategy):
    data = bad_sets["labels"]
    stderr, cluster, run = failed_run(logdir, "labels", data, f"--strategy={strategy}", "--num_workers=2",
                                      "--num_classes=10")
    said = re.escape(f"{cluster['failed_task']}: InvalidArgumentError: Received a label value of 50 which is outside "
                     f"the valid range of [0, 10).")
    assert re.match(said, cluster["reason"]), cluster["reason"]
    if strategy == "parameter_server":  # the closure failed on a worker, and raised on the chief
        assert cluster["failed_task"] == "chief_0" and re.search(r" \(in a closure on worker_\d\)$", cluster["reason"])
    else:  # the first rank horovodrun saw fail
        assert re.fullmatch(r"worker_\d", cluster["failed_task"])
    with open(os.path.join(run, "tasks", f"{cluster['failed_task']}.log")) as f:
        assert "Graph execution error" in f.read()  # TensorFlow's whole message, kept in the log
