"""The manual path: `python -m cluster.by_hand --run_dir` prepares a run directory and prints each
host's commands; running exactly those on localhost, then the printed merge command, gives the
same cluster record and table as the local launcher."""
import json
import os
import subprocess
import time

import pytest

from conftest import ROOT, TINY, autograph_files, processes_mentioning, run_cli
from tfrun import cluster_record, task_records


def plan_output(run_dir, *args):
    proc = run_cli(*TINY, f"--run_dir={run_dir}", *args, module="cluster.by_hand", timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_run_dir_is_prepared_and_commands_are_per_host(tmp_path):
    run_dir = str(tmp_path / "ps-run")
    out = plan_output(run_dir, "--strategy=parameter_server", "--num_workers=2", "--hosts=nodeA,nodeB")
    for name in ("config.json", "plan.json", "environment.json"):
        assert os.path.getsize(os.path.join(run_dir, name)) > 0
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    assert config["run_id"] == "ps-run" and config["hosts"] == ["nodeA", "nodeB"]
    lines = out.splitlines()
    on_a, on_b = lines.index("# on nodeA:"), lines.index("# on nodeB:")
    a_tasks = [line.split("--task ")[1].split()[0] for line in lines[on_a + 1:on_b]]
    b_tasks = [line.split("--task ")[1].split()[0] for line in lines[on_b + 1:] if "--task " in line]
    assert sorted(a_tasks) == ["chief_0", "ps_0", "worker_0"] and b_tasks == ["worker_1"]
    assert f"-m cluster.merge --run_dir {run_dir}" in lines[-1]
    assert "serve until stopped" in out


def test_a_user_models_directory_is_on_every_printed_commands_path():
    """--model=package.module:function: the directory the module was found under reaches every
    task started by hand, and the merge (which prints the table), beside tfbench's own."""
    from cluster import by_hand
    from cluster.plan.topology import make_plan
    from tfbench.config import RunConfig

    plan = make_plan(RunConfig(strategy="multi_worker_mirrored", num_workers=2, hosts=("nodeA", "nodeB")))
    text = by_hand.render_run_commands(plan, "/shared/run", ("/home/me/models",))
    starts = [line for line in text.splitlines() if "-m tfbench.task" in line or "-m cluster.merge" in line]
    assert len(starts) == 3 and all(f"PYTHONPATH={ROOT}:/home/me/models " in line for line in starts)
    assert f"PYTHONPATH={ROOT} " in by_hand.render_run_commands(plan, "/shared/run")


def test_existing_run_dir_is_refused(tmp_path):
    (tmp_path / "taken").mkdir()
    proc = run_cli(*TINY, f"--run_dir={tmp_path / 'taken'}", module="cluster.by_hand", timeout=60)
    assert proc.returncode == 2 and "already exists" in proc.stderr


def test_merge_refuses_a_directory_that_is_no_run(tmp_path):
    proc = run_cli(f"--run_dir={tmp_path}", module="cluster.merge", timeout=60)
    assert proc.returncode == 2 and "not a tfbench run directory" in proc.stderr


@pytest.mark.slow
def test_printed_commands_run_a_cluster_on_localhost(tmp_path):
    run_dir = str(tmp_path / "mwms")
    out = plan_output(run_dir, "--strategy=multi_worker_mirrored", "--num_workers=2")
    lines = out.splitlines()
    starts = [line for line in lines if line.startswith("(")]
    merge = lines[-1]
    assert len(starts) == 2
    before = autograph_files()
    subprocess.run(["bash", "-c", "\n".join(starts)], check=True, cwd=ROOT, timeout=30)
    deadline = time.monotonic() + 240
    results = os.path.join(run_dir, "results.jsonl")
    while not os.path.exists(results) or len(task_records(run_dir)) < 2:
        assert time.monotonic() < deadline, open(os.path.join(run_dir, "tasks", "worker_0.log")).read()[-3000:]
        time.sleep(1)
    while processes_mentioning(run_dir) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not processes_mentioning(run_dir)
    assert autograph_files() <= before  # each task removed its own temporary directory as it ended
    merged = subprocess.run(["bash", "-c", merge], capture_output=True, text=True, timeout=60)
    assert merged.returncode == 0, merged.stderr
    cluster = cluster_record(run_dir)
    assert cluster["status"] == "ok" and cluster["launcher"] == "manual" and cluster["num_tasks"] == 2
    assert cluster["images"] == 2 * 4 * 3  # two workers, per-replica batch 4, 3 measured steps
    assert "worker_0" in merged.stdout and "worker_1" in merged.stdout and "cluster" in merged.stdout
    again = subprocess.run(["bash", "-c", merge], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "cluster" in again.stdout
    assert cluster_record(run_dir) == cluster  # merged once: a second merge prints, appends nothing
