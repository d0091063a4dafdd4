"""Input from files (--data_dir, tfbench.data.records; python -m tools.data) and the wait for it in
the step split: what is refused before anything starts (tfbench.data.shards: files that are not
shards, labels --num_classes cannot hold), how readers share files, and the shared runs that read
an image set (tests/clusters.py: python -m tools.data's four shards, and one shard written as
ImageNet's conversion script writes it, labelled 1..1000, by tests/imagenet_records.py)."""
import glob
import os

import imagenet_records
import pytest

from conftest import TINY, run_cli
from tfbench.config import RunConfig
from tfbench.data import records
from tfrun import cluster_record, task_records

# scenario -> (files of its set, readers, how they share them)
FILE_RUNS = {"hard_default": (1, 1, "file"), "mwms_ring_forward": (4, 2, "file"),
             "ps_two_ps_forward": (1, 2, "example"), "horovod_fp16_hard": (4, 2, "file"),
             "horovod_one_shard": (1, 2, "example")}


def test_readers_get_their_own_files_or_every_nth_example():
    assert records.sharding(5, 2)["files_per_reader"] == [3, 2] and records.sharding(5, 2)["policy"] == "file"
    assert records.sharding(1, 2)["policy"] == "example" and "files_per_reader" not in records.sharding(1, 2)
    config = RunConfig(data_dir="/nowhere", input_threads=3)
    assert records.threads(config, 1) == 3 and records.threads(RunConfig(), 4) == 4


@pytest.mark.parametrize("flags,says", [
    (["--data_dir=/nonexistent/tfbench"], "--data_dir=/nonexistent/tfbench is not a directory"),
    (["--data_dir={empty}"], "holds no TFRecord shards named train-*"),
    (["--input_threads=2"], "--input_threads sets the threads of --data_dir's input pipeline"),
    (["--data_dir={empty}", "--input_threads=-1"], "--input_threads must be 0"),
    (["--data_dir={empty}", "--dataset=digits", "--num_classes=10"], "are two inputs: give one"),
    (["--data_dir={empty}", "--model=bert_tiny"], "--data_dir applies to image workloads"),
    (["--data_dir={one}", "--strategy=horovod", "--num_workers=2", "--horovod_elastic"], "runs on synthetic data"),
])
def test_bad_input_flags_are_refused_before_anything_starts(tmp_path, flags, says):
    empty, one = tmp_path / "empty", tmp_path / "one"
    empty.mkdir()
    one.mkdir()
    (one / "train-00000-of-00001").write_bytes(b"")
    proc = run_cli(*(f.format(empty=empty, one=one) for f in flags), "--dry_run")
    assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize("flags,says", [
    ([], "--data_dir is required"),
    (["--data_dir={d}", "--num_examples=0"], "--num_examples must be positive"),
    (["--data_dir={d}", "--num_examples=4", "--num_shards=5"], "--num_shards must be 1..--num_examples (4)"),
    (["--data_dir={d}", "--image_size=4"], "--image_size must be 8.."),
    (["--data_dir={d}", "--quality=0"], "--quality must be 1..100"),
    (["--data_dir={full}"], "holds train-* files already"),
])
def test_the_generator_refuses_bad_input_before_writing(tmp_path, flags, says):
    full = tmp_path / "full"
    full.mkdir()
    (full / "train-00000-of-00001").write_bytes(b"")
    proc = run_cli(*(f.format(d=tmp_path / "new", full=full) for f in flags), module="tools.data")
    assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(FILE_RUNS))
def test_runs_that_read_files_split_out_the_wait_for_input(clusters, scenario):
    """Each worker read its files through the stated pipeline (its own files, or every N-th example
    of a set of fewer files than readers, one shard included, under every strategy); the cluster's
    step split has an input part, measured, and the parts still add up to the step."""
    launched = clusters[scenario]
    files, readers, policy = FILE_RUNS[scenario]
    cluster = cluster_record(launched.run)
    workers = {n: r for n, r in task_records(launched.run).items() if n.startswith("worker")}
    assert len(workers) == readers
    for record in workers.values():
        pipeline = record["input_pipeline"]
        assert (pipeline["files"], pipeline["readers"], pipeline["policy"]) == (files, readers, policy)
        assert policy == "example" or sum(pipeline["files_per_reader"]) == files
        assert pipeline["threads"] == (launched.config["input_threads"] or len(record["cores"]))
        assert 1 <= pipeline["files_read_at_once"] <= files
    split = cluster["step_breakdown"]
    assert "input" in split["methods"] and split["mean_s"]["input"] > 0
    assert split["sum_check"]["within"], split["sum_check"]
    assert "+ input " in launched.out
    assert f"input: {files} TFRecord file(s) of {launched.config['data_dir']}" in launched.out


REFUSED = {  # a set of others' shards (tests/imagenet_records.py's flags), tfbench's flags, what it says
    "no_shard": (["--random_shard"], ["--num_classes=1001"],
                 "{set}/train-random is not a TFRecord shard of tf.Example images (image/encoded, "
                 "image/class/label): record 0: DataLossError: corrupted record at 0"),
    "garbage": (["--garbage_after=3"], ["--num_classes=1001"], "{set}/train-00000-of-00002 is not a TFRecord shard"),
    "from_1": ([], ["--num_classes=1000"], "--data_dir's labels run 1..1000 in the first records of its shards "
                                           "(ImageNet's numbering: classes from 1, 0 left for the background; "
                                           "tf_cnn_benchmarks trained ImageNet's 1..1000 with 1001 classes); "
                                           "--num_classes=1000 holds 0..999: set --num_classes=1001"),
    "negative": (["--labels=0:9", "--bad_labels=5:-3"], ["--num_classes=10"], "hold label -3; labels must be 0 or more"),
}


@pytest.fixture(scope="module")
def refused_sets(tmp_path_factory):
    """Each REFUSED set, written by one child process."""
    root = tmp_path_factory.mktemp("refused")
    paths = imagenet_records.written_sets([(root / name, "--shards=2", "--examples=16", "--size=16", *written)
                                           for name, (written, _, _) in REFUSED.items()])
    return dict(zip(REFUSED, paths))


@pytest.mark.slow
@pytest.mark.parametrize("case", REFUSED)
def test_shards_others_wrote_are_checked_before_anything_starts(tmp_path, refused_sets, case):
    """Sets in ImageNet's layout, not written by tools.data: a file that is no shard is named, and
    labels 1..1000 are refused at --num_classes=1000 with the --num_classes that holds them; nothing
    is started or written (no run directory)."""
    _, flags, says = REFUSED[case]
    data, logdir = refused_sets[case], tmp_path / "runs"
    proc = run_cli(*TINY, f"--data_dir={data}", *flags, f"--logdir={logdir}", "--run_id=refused",
                   env={"TFBENCH_SHARDS_CACHE": str(tmp_path / "shards.json")})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("tfbench: error: --data_dir") and says.format(set=data) in proc.stderr, proc.stderr
    assert not logdir.exists()


@pytest.mark.slow
def test_tensorboard_input_pipeline_analysis_reads_the_profile_of_a_run_with_files(clusters):
    """TensorBoard's Profile plugin converts the profile of a --data_dir --profile run into its
    input-pipeline analysis, which finds the run's tf.data iterators."""
    from xprof.convert import raw_to_tool_data  # TensorBoard Profile plugin's converter

    launched = clusters["hard_default"]
    traces = glob.glob(os.path.join(launched.run, "tb", "worker_0", "plugins", "profile", "*", "*.xplane.pb"))
    assert traces
    data, _ = raw_to_tool_data.xspace_to_tool_data(traces, "input_pipeline_analyzer", {})
    assert data and b"Iterator::" in (data if isinstance(data, bytes) else data.encode())
