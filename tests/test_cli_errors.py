"""Bad input ends with one clear line on stderr and exit code 2, before anything is written."""
import os

import pytest

from conftest import run_cli

BAD_INPUTS = [
    (["--model=vgg99"], "--model='vgg99' is unknown"),
    (["--mode=backward"], "--mode='backward' is unknown"),
    (["--batch_size=0"], "--batch_size must be positive"),
    (["--batch_size=-3"], "--batch_size must be positive"),
    (["--num_steps=0"], "--num_steps must be positive"),
    (["--num_warmup_steps=-1"], "--num_warmup_steps must be at least 1"),
    (["--num_warmup_steps=0"], "tracing must not land in a measured step"),
    (["--strategy=parameter_server", "--ps_sync", "--mode=forward"], "--ps_sync applies to --mode=train only"),
    (["--strategy=parameter_server", "--evaluator"], "evaluator"),
    (["--model=resnet50", "--image_size=16"], "too small for resnet50"),
    (["--data_format=NCWH"], "--data_format='NCWH' is unknown"),
    (["--data_format=NCHW"], "NCHW needs --device=gpu"),
    (["--strategy=ring"], "--strategy='ring' is unknown"),
    (["--strategy=default", "--num_workers=2"], "runs one task"),
    (["--strategy=multi_worker_mirrored", "--num_ps=1"], "--num_ps applies to --strategy=parameter_server"),
    (["--ps_sync"], "--ps_sync applies to --strategy=parameter_server"),
    (["--device=tpu"], "--device='tpu' is unknown"),
    (["--device=gpu", "--placement=hard"], "needs a GPU"),
    (["--batch_size=abc"], "batch_size"),
    (["--num_classes=1"], "--num_classes must be at least 2"),
    (["--profile_steps=99"], "outside the run's steps"),
    (["--run_id=../escape"], "--run_id='../escape' must be"),
    (["--all_reduce=ring"], "--all_reduce applies to --strategy=multi_worker_mirrored"),
    (["--no_such_flag=1"], "no_such_flag"),
    (["positional"], "unexpected arguments"),
    (["--logdir=/proc/nope", "--dry_run"], "--logdir='/proc/nope' cannot be created: /proc takes no new directory"),
    (["--network=emulated", "--link_bandwidth=500gbit", "--dry_run"], "above what tbf shapes (34.4 Gbit/s)"),
    (["--network=emulated", "--link_bandwidth=fdr_ib", "--dry_run"], "leave --link_bandwidth empty for an unshaped link"),
    (["--cores_per_worker=4096"], "--cores_per_worker must be between 0"),
    (["--straggler=worker_0:2"], "--straggler needs peers"),
    (["--strategy=multi_worker_mirrored", "--num_workers=2", "--straggler=worker_2:2"], "expected TASK:FACTOR"),
    (["--strategy=multi_worker_mirrored", "--num_workers=2", "--straggler=worker_1:1"], "above 1"),
    (["--strategy=horovod", "--num_workers=2", "--straggler=worker_1:2"], "needs --network=emulated"),
    (["--fault=worker_0:kill@1"], "--fault needs a cluster"),
    (["--strategy=multi_worker_mirrored", "--num_workers=2", "--fault=worker_1:boom@1"], "expected TASK:kill@STEP"),
    (["--strategy=multi_worker_mirrored", "--num_workers=2", "--fault=worker_3:kill@1"], "worker_3 is not a task"),
    (["--strategy=multi_worker_mirrored", "--num_workers=2", "--num_steps=5", "--fault=worker_1:kill@9"],
     "outside the measured steps 1..5"),
    (["--strategy=multi_worker_mirrored", "--num_workers=2", "--fault=worker_1:kill@1,worker_1:hang@2"],
     "at most one fault per task"),
    (["--strategy=multi_worker_mirrored", "--num_workers=2", "--fault=worker_1:kill@1", "--straggler=worker_1:2"],
     "also the straggler"),
    (["--checkpoint_every=2"], "--checkpoint_every applies to --strategy=multi_worker_mirrored or parameter_server"),
    (["--strategy=multi_worker_mirrored", "--num_workers=2", "--checkpoint_every=-1"], "must be 0 (none) or positive"),
    (["--strategy=multi_worker_mirrored", "--num_workers=2", "--num_steps=3", "--num_warmup_steps=1",
      "--checkpoint_every=9"], "saves nothing in a run of 4 steps"),
    (["--ps_staleness_bound=1"], "--ps_staleness_bound applies to --strategy=parameter_server only"),
    (["--strategy=parameter_server", "--ps_sync", "--ps_staleness_bound=0"], "does not combine with --ps_sync"),
    (["--strategy=parameter_server", "--ps_staleness_bound=-2"], "must be -1 (unbounded) or 0 or more"),
    (["--dataset=mnist"], "--dataset='mnist' is unknown"),
    (["--target_accuracy=0.9"], "--target_accuracy needs real labels"),
    (["--eval_every=5"], "--eval_every needs real labels"),
    (["--compute=fake"], "--compute='fake' is unknown"),
    (["--compute_ms=20"], "--compute_ms applies to --compute=emulated only"),
    (["--compute=emulated", "--compute_ms=-1"], "--compute_ms must be 0 (measured) or positive"),
    (["--compute=emulated", "--xla"], "XLA cannot compile"),
    (["--compute=emulated", "--dataset=digits", "--num_classes=10"], "needs --compute=real"),
    (["--dataset=digits", "--num_classes=1000"], "has 10 classes: set --num_classes=10"),
    (["--dataset=digits", "--num_classes=10", "--target_accuracy=1.5"], "fraction in (0, 1]"),
    (["--dataset=digits", "--num_classes=10", "--mode=forward"], "applies to --mode=train only"),
    (["--dataset=digits", "--num_classes=10", "--batch_size=1000", "--strategy=multi_worker_mirrored",
      "--num_workers=2"], "is more than the 718 training images each of the 2 workers"),
]


@pytest.mark.parametrize("args,expected", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_exits_2_with_one_line(tmp_path, args, expected):
    logdir = tmp_path / "runs"
    result = run_cli(f"--logdir={logdir}", *args, timeout=60)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tfbench: error: ")
    assert expected in lines[0]
    assert "Traceback" not in result.stderr
    assert not logdir.exists() or not any(logdir.iterdir())


def test_unwritable_logdir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = run_cli(f"--logdir={blocker}/runs", timeout=60)
    assert result.returncode == 2
    assert "cannot be created" in result.stderr


def test_existing_run_id_is_never_overwritten(tmp_path):
    (tmp_path / "runs" / "taken").mkdir(parents=True)
    (tmp_path / "runs" / "taken" / "results.jsonl").write_text("{}\n")
    result = run_cli(f"--logdir={tmp_path / 'runs'}", "--run_id=taken", timeout=60)
    assert result.returncode == 2
    assert "already exists" in result.stderr
    assert (tmp_path / "runs" / "taken" / "results.jsonl").read_text() == "{}\n"


def test_flagfile_and_helpfull(tmp_path):
    flagfile = tmp_path / "flags.txt"
    flagfile.write_text("--batch_size=0\n")
    result = run_cli(f"--flagfile={flagfile}", f"--logdir={tmp_path}", timeout=60)
    assert result.returncode == 2 and "--batch_size must be positive" in result.stderr
    helped = run_cli("--helpfull", timeout=60)
    assert "--ps_placement" in helped.stdout + helped.stderr
    assert os.path.exists(flagfile)
