"""tools.sweep with a fake tfbench: grid expansion, failure isolation, resume, timeouts, CLI.

The fake takes tfbench's flags, refuses an existing run dir as tfbench does, and writes a run
directory with real records; FAKE_FAIL / FAKE_SLEEP (substrings of the run id) make chosen
points fail or hang, and every call is logged to FAKE_CALLS.
"""
import json
import os
import shlex
import subprocess
import sys
import textwrap

import pytest

from tfbench.config.errors import ConfigError
from tfbench.results import records
from tools.rundirs.sweep_state import SweepDir
from tools.sweep import cli as sweep
from tools.sweep import grid as grid_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FAKE = textwrap.dedent(f"""
    import json, os, sys, time

    sys.path.insert(0, {REPO!r})
    from tfbench.results import rundir  # light imports only: the fake must start fast
    from tfbench.config import RunConfig
    from tfbench.config.errors import ConfigError
    from tools.sweep.grid import coerce

    args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
    config = RunConfig(**{{k: coerce(k, v) for k, v in args.items()}})
    with open(os.environ["FAKE_CALLS"], "a") as f:
        f.write(config.run_id + "\\n")
    try:
        run = rundir.create(config.logdir, config.run_id)
    except ConfigError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    run.write_json("config.json", config.to_dict())
    if os.environ.get("FAKE_SLEEP") and os.environ["FAKE_SLEEP"] in config.run_id:
        time.sleep(60)
    if os.environ.get("FAKE_FAIL") and os.environ["FAKE_FAIL"] in config.run_id:
        print("tfbench: starting 3 tasks", file=sys.stderr)
        print("tfbench: run failed: worker_1 exited with code 1", file=sys.stderr)
        sys.exit(1)
    step = 0.1 * config.batch_size / 16 * (1 + 0.25 * (config.num_workers - 1))
    window = step * config.num_steps
    images = config.batch_size * config.num_steps * config.num_workers
    lines = [{{"kind": "task", "role": "worker", "index": i, "examples_per_step": config.batch_size,
              "num_measured_steps": config.num_steps, "step_times_s": [step] * config.num_steps,
              "images_per_sec": config.batch_size / step, "window_start": 1000.0, "window_end": 1000.0 + window}}
             for i in range(config.num_workers)]
    lines.append({{"kind": "cluster", "status": "ok", "images": images, "window_s": window,
                  "images_per_sec": images / window, "config": config.to_dict()}})
    with open(run.results, "w") as f:
        f.writelines(json.dumps(line) + "\\n" for line in lines)
    print("table")
""")

GRID = {"strategy": ["mirrored", "multi_worker_mirrored", "parameter_server"], "num_workers": [1, 2],
        "batch_size": [16], "model": "tiny", "image_size": 32, "fixed": {"num_steps": 4, "num_warmup_steps": 1}}


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / "fake_tfbench.py"
    script.write_text(FAKE)
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_CALLS", str(calls))
    monkeypatch.delenv("FAKE_FAIL", raising=False)
    monkeypatch.delenv("FAKE_SLEEP", raising=False)

    def read_calls():
        return calls.read_text().split() if calls.exists() else []

    return [sys.executable, str(script)], read_calls


def run(sweep_dir, grid=GRID, command=None, **kwargs):
    logged = []
    result = sweep.run_sweep(str(sweep_dir), grid_lib.Grid.from_dict(grid), command, log=logged.append, **kwargs)
    return result, logged


def test_expansion_drops_invalid_combinations_with_a_note(tmp_path):
    points, notes = grid_lib.expand(grid_lib.Grid.from_dict({**GRID, "num_ps": [0, 1], "repeats": 2}), str(tmp_path))
    ids = [p.id for p in points]
    assert ids[:5] == ["mirrored-w1-d1-b16-train-soft-cpu-tiny-32px-r0",
                       "multi_worker_mirrored-w1-b16-train-soft-cpu-tiny-32px-r0",
                       "multi_worker_mirrored-w2-b16-train-soft-cpu-tiny-32px-r0",
                       "parameter_server-w1-ps1-b16-train-soft-cpu-tiny-32px-r0",
                       "parameter_server-w2-ps1-b16-train-soft-cpu-tiny-32px-r0"]
    assert len(ids) == 10 and ids[5].endswith("-r1")
    assert any(n.startswith("dropped 2 point(s): --strategy=mirrored runs one task") for n in notes)
    assert any("merged" in n for n in notes)
    flags = points[3].flags({"num_steps": 4, "ps_sync": True})
    assert "--strategy=parameter_server" in flags and "--num_ps=1" in flags and "--ps_sync=true" in flags


def test_grid_rejects_unknown_flags_and_sweep_owned_ones():
    with pytest.raises(ConfigError, match="not a tfbench flag"):
        grid_lib.Grid.from_dict({"fixed": {"num_stepz": 3}})
    with pytest.raises(ConfigError, match="set by the sweep"):
        grid_lib.Grid.from_dict({"fixed": {"run_id": "x"}})
    with pytest.raises(ConfigError, match="not a valid int"):
        grid_lib.Grid.from_dict({"batch_size": ["big"]})


def test_a_failed_point_is_recorded_and_the_sweep_goes_on(tmp_path, fake, monkeypatch):
    command, calls = fake
    monkeypatch.setenv("FAKE_FAIL", "parameter_server-w1")
    result, logged = run(tmp_path / "sw", command=command)
    assert (result.done, result.failed, result.skipped) == (4, 1, 0)
    assert calls()[-1].startswith("parameter_server-w2")  # the point after the failure still ran
    latest = SweepDir(str(tmp_path / "sw")).latest()
    failed = latest["parameter_server-w1-ps1-b16-train-soft-cpu-tiny-32px-r0"]
    assert failed["status"] == "failed" and failed["returncode"] == 1
    assert failed["reason"] == "tfbench: run failed: worker_1 exited with code 1"
    done = latest["multi_worker_mirrored-w2-b16-train-soft-cpu-tiny-32px-r0"]
    assert done["status"] == "done" and done["rate"] == pytest.approx(2 * 16 / 0.125) and done["unit"] == "images"
    assert "--num_steps=4" in done["argv"] and "--model=tiny" in done["argv"]
    assert any("FAILED" in line and "worker_1 exited" in line for line in logged)
    spec = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert len(spec["points"]) == 5 and spec["grid"]["strategy"] == GRID["strategy"]


def test_rerun_skips_done_points_and_retries_failed_ones_under_a_new_run_id(tmp_path, fake, monkeypatch):
    command, calls = fake
    monkeypatch.setenv("FAKE_FAIL", "parameter_server-w1")
    run(tmp_path / "sw", command=command)
    first = calls()
    monkeypatch.delenv("FAKE_FAIL")
    result, logged = run(tmp_path / "sw", command=command)
    assert (result.done, result.failed, result.skipped) == (1, 0, 4)
    assert calls()[len(first):] == ["parameter_server-w1-ps1-b16-train-soft-cpu-tiny-32px-r0-try2"]
    assert sum("done earlier" in line for line in logged) == 4
    state = SweepDir(str(tmp_path / "sw"))
    assert all(a["status"] == "done" for a in state.latest().values())
    assert len(state.attempts()) == 6
    runs = sorted(os.listdir(state.runs_dir))
    assert "parameter_server-w1-ps1-b16-train-soft-cpu-tiny-32px-r0" in runs  # the failed run is kept
    assert "parameter_server-w1-ps1-b16-train-soft-cpu-tiny-32px-r0-try2" in runs
    result, _ = run(tmp_path / "sw", command=command)
    assert (result.done, result.failed, result.skipped) == (0, 0, 5)
    with pytest.raises(ConfigError, match="different grid"):
        run(tmp_path / "sw", grid={**GRID, "batch_size": [8]}, command=command)


def test_an_interrupted_point_is_rerun_without_reusing_its_run_dir(tmp_path, fake):
    command, calls = fake
    state = SweepDir(str(tmp_path / "sw"))
    os.makedirs(os.path.join(state.runs_dir, "mirrored-w1-d1-b16-train-soft-cpu-tiny-32px-r0"))
    result, _ = run(tmp_path / "sw", grid={**GRID, "strategy": ["mirrored"], "num_workers": [1]}, command=command)
    assert result.done == 1 and calls() == ["mirrored-w1-d1-b16-train-soft-cpu-tiny-32px-r0-try2"]


def test_a_point_past_its_timeout_is_stopped_and_recorded(tmp_path, fake, monkeypatch):
    command, _ = fake
    monkeypatch.setenv("FAKE_SLEEP", "multi_worker_mirrored-w1")
    grid = {**GRID, "strategy": ["multi_worker_mirrored"], "timeout_s": 1}
    result, _ = run(tmp_path / "sw", grid=grid, command=command, kill_grace_s=0.5)
    assert (result.done, result.failed) == (1, 1)
    attempt = SweepDir(str(tmp_path / "sw")).latest()["multi_worker_mirrored-w1-b16-train-soft-cpu-tiny-32px-r0"]
    assert attempt["status"] == "failed" and attempt["returncode"] is None
    assert attempt["reason"].startswith("timed out after 1.5 s")
    assert attempt["elapsed_s"] < 15
    assert "--deadline=1" in attempt["argv"]


def test_cli_runs_the_sweep_then_prints_the_report(tmp_path, fake, monkeypatch):
    command, _ = fake
    monkeypatch.setenv("FAKE_FAIL", "parameter_server-w2")
    config = tmp_path / "grid.yaml"
    config.write_text("strategy: [default, multi_worker_mirrored, parameter_server]\nnum_workers: [1, 2]\n"
                      "batch_size: [16]\nmodel: tiny\nimage_size: 32\nfixed: {num_warmup_steps: 1}\n")
    sweep_dir = tmp_path / "sw"
    proc = subprocess.run([sys.executable, "-m", "tools.sweep", f"--config={config}", f"--sweep_dir={sweep_dir}",
                           "--set=num_steps=3", f"--command={shlex.join(command)}"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # one point failed
    assert "4 point(s) done now, 0 done earlier, 1 failed" in proc.stdout
    assert "- dropped 1 point(s): --strategy=default runs one task" in proc.stdout  # in the report's notes
    assert "| multi_worker_mirrored | 2 | 0 | 16 | 32 | train | soft | cpu |" in proc.stdout
    assert "worker_1 exited with code 1" in proc.stdout  # listed among the failed runs
    assert (sweep_dir / "report" / "results.csv").exists()
    rows = records.read(str(sweep_dir / "points.jsonl"))
    assert {r["status"] for r in rows} == {"done", "failed"}
    assert all("--num_steps=3" in r["argv"] for r in rows)
    proc = subprocess.run([sys.executable, "-m", "tools.sweep", f"--sweep_dir={sweep_dir}", "--batch_size=8",
                           f"--command={shlex.join(command)}"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "different grid" in proc.stderr


def test_sweeps_over_cluster_sizes_give_every_point_the_same_cores_per_worker(monkeypatch):
    from cluster.plan import cores

    monkeypatch.setattr(cores, "available_cores", lambda: (0, 1, 2, 3))
    Grid = grid_lib.Grid
    grid = Grid.from_dict({"strategy": ["multi_worker_mirrored"], "num_workers": [1, 2]})
    assert grid.fixed["cores_per_worker"] == 2  # the 1-worker baseline no longer takes all 4
    assert "cores_per_worker" not in Grid.from_dict({"num_workers": [1]}).fixed
    assert Grid.from_dict({"num_workers": [1, 2], "fixed": {"cores_per_worker": 1}}).fixed["cores_per_worker"] == 1


@pytest.mark.parametrize("args,expected", [
    (["--strategy=mwms", "--num_workers=1,2"],
     "tools.sweep: error: sweep value --strategy=mwms selects no point: --strategy='mwms' is unknown; choose one of "),
    (["--strategy=default", "--num_workers=1,2"],
     "tools.sweep: error: sweep value --num_workers=2 selects no point: --strategy=default runs one task"),
    (["--model=vgg99", "--dry_run"], "tools.sweep: error: sweep value --model=vgg99 selects no point: --model='vgg99'"),
])
def test_a_sweep_value_that_selects_no_point_is_bad_input(tmp_path, args, expected):
    """Exit 2 and one line, before the sweep directory or any run exists."""
    sweep_dir = tmp_path / "sw"
    proc = subprocess.run([sys.executable, "-m", "tools.sweep", *args, f"--sweep_dir={sweep_dir}"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith(expected), proc.stderr
    assert proc.stdout == ""
    assert not sweep_dir.exists()
def test_the_launcher_is_an_axis_and_slurm_nodes_applies_to_slurm_only(tmp_path):
    grid = grid_lib.Grid.from_dict({"model": ["tiny"], "strategy": ["multi_worker_mirrored"], "num_workers": [2],
                                    "network": ["emulated"], "link_bandwidth": ["100mbit"],
                                    "launcher": ["local", "slurm"], "slurm_nodes": [0]})
    points, _ = grid_lib.expand(grid, str(tmp_path))
    assert [p.id.split("-emu-100mbit")[1] for p in points] == ["-r0", "-slurm-auto-r0"]
    local, slurm = (p.flags({}) for p in points)
    assert "--launcher=local" in local and "--slurm_nodes=1" in local  # neutral off Slurm: not refused
    assert "--launcher=slurm" in slurm and "--slurm_nodes=0" in slurm
