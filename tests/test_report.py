"""tools.report on hand-made run directories whose numbers are known in advance.

Runs (per-replica batch 16, 5 measured steps per worker, all workers starting together):
  mwms w1 soft: 0.5 s steps -> 80 images / 2.5 s = 32 img/s
  mwms w1 soft, repeat: 0.4 s steps -> 40 img/s           (point mean 36, spread sqrt(32))
  mwms w1 hard: 0.625 s steps -> 25.6 img/s               (hard / soft = 25.6 / 36)
  mwms w2 soft: 0.8 s steps -> 160 images / 4 s = 40 img/s (efficiency 40 / (2 x 36))
  ps   w1: 0.6 s steps -> 26.666 img/s; ps w2: 1.0 s steps -> 32 img/s (efficiency 0.6)
  plus one failed ps run.
"""
import csv
import json
import math
import os
import subprocess
import sys

import pytest

from tests.report_runs import monitor_samples, write_run
from tfbench.config import RunConfig
from tfbench.results import records
from tools.report import aggregate
from tools.report import cli as report

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("runs"))
    flat = {"worker_0": {"cpu_percent_mean": 95.0, "rss_mb_peak": 600.0, "net_tx_bytes": 1000, "net_rx_bytes": 2000}}
    write_run(root, "mwms-w1", "multi_worker_mirrored", 1, 0.5, resources=flat)
    write_run(root, "mwms-w1-again", "multi_worker_mirrored", 1, 0.4)
    write_run(root, "mwms-w1-hard", "multi_worker_mirrored", 1, 0.625, placement="hard")
    write_run(root, "mwms-w2", "multi_worker_mirrored", 2, 0.8)
    write_run(root, "ps-w1", "parameter_server", 1, 0.6)
    for run in ("mwms-w1", "ps-w1"):
        with open(os.path.join(root, run, "environment.json"), "w") as f:
            json.dump({"tfbench_commit": "abc1234" if run == "ps-w1" else "abc1234+modified"}, f)
    summary = {"tasks": {name: {"role": name.split("_")[0], "samples": 8, "cpu_percent_mean": 93.5,
                                "rss_mb_peak": 570.0, "net_tx_bytes": 7_000_000 * (3 if name == "ps_0" else 1),
                                "net_rx_bytes": 14_000_000} for name in ("chief_0", "worker_0", "worker_1", "ps_0")},
               "workers_mean": {"tasks": 2, "cpu_percent_mean": 93.5}, "host": {"samples": 8}}
    write_run(root, "ps-w2", "parameter_server", 2, 1.0, resources=summary,
              monitor=monitor_samples(["chief_0", "worker_0", "worker_1", "ps_0"]))
    failed = os.path.join(root, "ps-w2-failed")
    os.makedirs(failed)
    config = RunConfig(strategy="parameter_server", num_workers=2, batch_size=32, run_id="ps-w2-failed").to_dict()
    records.append(os.path.join(failed, "results.jsonl"),
                   {"kind": "cluster", "run_id": "ps-w2-failed", "status": "failed", "failed_task": "ps_0",
                    "reason": "ps_0 exited with code 1: Resource exhausted", "config": config})
    out = os.path.join(root, "report")
    return root, out, report.build(root, out)


def cluster_rows(out):
    with open(os.path.join(out, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    return rows, {r["run_id"]: r for r in rows if r["kind"] == "cluster"}


def test_csv_has_one_row_per_record_with_config_and_efficiency(built):
    _, out, _ = built
    rows, cluster = cluster_rows(out)
    assert len(cluster) == 7
    assert len([r for r in rows if r["kind"] == "task"]) == 1 + 1 + 1 + 2 + 1 + (2 + 2)  # ps-w2: + chief_0, ps_0
    w2 = cluster["mwms-w2"]
    assert float(w2["rate_per_sec"]) == pytest.approx(40.0) == float(w2["images_per_sec"])
    assert float(w2["examples_per_sec"]) == pytest.approx(40.0)
    assert w2["unit"] == "images" and w2["tokens_per_sec"] == ""
    assert float(w2["scaling_efficiency"]) == pytest.approx(40.0 / (2 * 36.0))
    assert w2["strategy"] == "multi_worker_mirrored" and w2["num_workers"] == "2" and w2["batch_size"] == "16"
    assert w2["global_batch_size"] == "32" and w2["image_size"] == "64"
    assert float(w2["step_mean_s"]) == pytest.approx(0.8)
    assert float(w2["rate_per_sec_ci95_low"]) < 40.0 < float(w2["rate_per_sec_ci95_high"])
    assert float(cluster["ps-w2"]["scaling_efficiency"]) == pytest.approx(32.0 / (2 * 80 / 3.0))
    assert float(cluster["mwms-w1"]["scaling_efficiency"]) == pytest.approx(32.0 / 36.0)
    assert cluster["mwms-w1-hard"]["placement"] == "hard"
    assert float(cluster["ps-w2"]["resources.cpu_percent_mean"]) == 93.5  # the workers' mean
    failed = cluster["ps-w2-failed"]
    assert failed["status"] == "failed" and failed["failed_task"] == "ps_0"
    assert failed["reason"] == "ps_0 exited with code 1: Resource exhausted"
    assert failed["images_per_sec"] == "" and failed["batch_size"] == "32"


def test_task_rows_carry_their_resources_and_record_fields(built):
    _, out, _ = built
    rows, _ = cluster_rows(out)
    tasks = {(r["run_id"], r["task"]): r for r in rows if r["kind"] == "task"}
    assert float(tasks[("ps-w2", "worker_1")]["resources.rss_mb_peak"]) == 570.0
    ps = tasks[("ps-w2", "ps_0")]  # monitored, no record of its own: a row with its resources
    assert float(ps["resources.net_tx_bytes"]) == 21_000_000 and ps["role"] == "ps" and ps["images_per_sec"] == ""
    assert float(tasks[("mwms-w1", "worker_0")]["resources.cpu_percent_mean"]) == 95.0
    worker = tasks[("mwms-w2", "worker_1")]
    assert float(worker["images_per_sec"]) == pytest.approx(20.0)
    assert worker["placement"] == "soft" and worker["host"] == "" and worker["replicas"] == "2"
    assert len(worker["step_times_s"].split()) == 5


def test_repeats_are_combined(built):
    _, _, rep = built
    by_id = {tuple(r.run_id for r in p.runs): p for p in rep.points}
    point = by_id[("mwms-w1", "mwms-w1-again")]
    assert point.rate == pytest.approx(36.0) and point.unit == "images"
    assert point.spread == pytest.approx(math.sqrt(32.0))
    # repeats give a between-run interval: over the 2 run means, not the 10 pooled steps
    assert point.stats["count"] == 2 and point.stats["over"] == "run means"
    assert point.stats["mean_s"] == pytest.approx(0.45)
    low, high = point.interval
    half = 12.706205 * math.sqrt(32.0) / math.sqrt(2)  # t(0.975, 1 dof) x s / sqrt(2)
    assert low == pytest.approx(36.0 - half, rel=1e-5) and high == pytest.approx(36.0 + half, rel=1e-5)
    single = by_id[("mwms-w2",)]
    assert single.stats["over"] == "global steps of one run" and single.stats["count"] == 5
    assert len(rep.points) == 5


def test_scaling_efficiency_is_refused_across_different_cores_per_worker(tmp_path):
    root = str(tmp_path)
    write_run(root, "w1", "multi_worker_mirrored", 1, 0.5, cores=2)
    write_run(root, "w2", "multi_worker_mirrored", 2, 0.8, cores=1)
    points = {p.config["scale"]: p for p in aggregate.combine(report.find_runs(root))}
    assert math.isnan(points[2].efficiency)
    assert "cores per worker differ" in points[2].efficiency_note
    same = str(tmp_path / "same")
    write_run(same, "w1", "multi_worker_mirrored", 1, 0.5, cores=1)
    write_run(same, "w2", "multi_worker_mirrored", 2, 0.8, cores=1)
    points = {p.config["scale"]: p for p in aggregate.combine(report.find_runs(same))}
    assert points[2].efficiency == pytest.approx(40.0 / (2 * 32.0)) and not points[2].efficiency_note


def test_mirrored_counts_cores_per_local_replica():
    """Mirrored's 2 devices on 2 cores used to count as 2 cores per worker against 1 at one
    device, so its scaling efficiency was refused."""
    def task(cores, local):
        return {"kind": "task", "role": "worker", "num_measured_steps": 5, "cores": cores, "local_replicas": local}

    assert records.cores_per_worker([task([0, 1], 2)]) == 1
    assert records.cores_per_worker([task([0], 1)]) == 1
    assert records.cores_per_worker([task([0, 1], 1)]) == 2
    assert records.cores_per_worker([task([0], 2)]) == 0.5
    assert records.cores_per_worker([task([0], 1), task([0, 1], 1)]) is None


def test_a_failed_run_retried_ok_later_is_marked_not_counted_as_lost(tmp_path):
    """A sweep re-run fills a failed point with a new run; the failed attempt stays, marked."""
    root = str(tmp_path)
    write_run(root, "w2-try2", "multi_worker_mirrored", 2, 0.8)
    with open(os.path.join(root, "w2-try2", "config.json")) as f:
        config = dict(json.load(f), run_id="w2")
    os.makedirs(os.path.join(root, "w2"))
    records.append(os.path.join(root, "w2", "results.jsonl"),
                   {"kind": "cluster", "run_id": "w2", "status": "failed", "failed_task": "worker_1",
                    "reason": "worker_1 exited with code 1", "config": config})
    rep = report.build(root)
    assert [f.retried_ok for f in rep.failures] == [True]
    assert "1 failed (1 of them retried ok later)" in rep.markdown and "| ok later |" in rep.markdown


def test_rate_interval_carries_the_step_time_ci_over():
    low, high = aggregate.rate_interval(40.0, {"mean_s": 0.8, "ci95_s": 0.2})
    assert low == pytest.approx(32.0) and high == pytest.approx(40.0 * 0.8 / 0.6)
    assert all(math.isnan(v) for v in aggregate.rate_interval(40.0, {"mean_s": 0.8, "ci95_s": float("nan")}))


def test_summary_lists_results_comparison_and_failures(built):
    _, out, rep = built
    with open(os.path.join(out, "summary.md")) as f:
        text = f.read()
    assert text == rep.markdown
    assert ("Model resnet50 at 64 px; 3 warm-up + 5 measured steps per run; measured at tfbench abc1234, "
            "abc1234+modified." in text)
    row = next(line for line in text.splitlines() if line.startswith("| multi_worker_mirrored | 2 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:8] == ["multi_worker_mirrored", "2", "0", "16", "32", "train", "soft", "cpu"]
    assert cells[8] == "40.0" and cells[9] == "1" and cells[-1] == "56%"
    assert "800.0 ± " in cells[11]
    assert "| multi_worker_mirrored | 1 | 0 | 16 | 16 | train | hard | cpu | 25.6 | 1 | – |" in text
    assert "## Hard vs soft placement" in text
    assert "| multi_worker_mirrored | 1 | 0 | 16 | train | cpu | 36.0 | 25.6 | 0.71 |" in text
    assert "## CPU vs GPU" not in text
    assert ("- At 2 workers multi_worker_mirrored (placement=soft) is fastest (40.0 images/sec, "
            "1.25× parameter_server).") in text
    assert text.index("## Findings") < text.index("## Results")
    assert "| ps-w2-failed | parameter_server | 2 | 32 |" in text
    assert "ps_0 exited with code 1: Resource exhausted" in text


@pytest.mark.parametrize("name", ["throughput_vs_workers.png", "scaling_efficiency.png",
                                  os.path.join("resources", "ps-w2.png")])
def test_plots_are_png_files(built, name):
    _, out, rep = built
    path = os.path.join(out, name)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 1024
    assert f"({name})" in rep.markdown
    assert sorted(os.listdir(os.path.join(out, "resources"))) == ["ps-w2.png"]


def test_step_time_plot_needs_two_batch_sizes(built):
    _, out, rep = built  # every run has batch 16: a step-time-vs-batch plot would join nothing
    assert not os.path.exists(os.path.join(out, "seconds_per_batch.png"))
    assert "seconds_per_batch.png" not in rep.markdown


def test_cli_prints_the_table_and_rejects_missing_dirs(built, tmp_path):
    root, _, _ = built
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "tools.report", root, f"--out={out}"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "| parameter_server | 2 | 1 | 16 | 32 | train | soft | cpu |" in proc.stdout
    assert (out / "results.csv").exists() and (out / "summary.md").exists()
    proc = subprocess.run([sys.executable, "-m", "tools.report", str(tmp_path / "missing")], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no such directory" in proc.stderr


def test_recovery_and_convergence_sections_come_from_the_cluster_records():
    from tools.report import convergence_section, recovery_section
    from tools.report.aggregate import Point
    from tools.rundirs.runs import Run

    config = {"strategy": "parameter_server", "num_workers": 2, "ps_staleness_bound": 1, "run_id": "r"}
    cluster = {"status": "ok", "images_per_sec": 100.0, "updates": 40, "updates_per_sec": 20.0,
               "staleness": {"max": 2, "mean": 0.5}, "clock_staleness": {"max": 1}, "idleness": {"worker_0": 0.2},
               "convergence": {"final_accuracy": 0.91, "target_accuracy": 0.9, "reached": True,
                               "time_to_accuracy_s": 3.0, "updates_to_accuracy": 30,
                               "points": [{"step": 45, "images": 2560, "accuracy": 0.91}]},
               "faults": [{"task": "worker_1", "applied_at_measured_step": 5}],
               "recovery": [{"task": "worker_1", "kind": "kill", "time_to_ready_s": 4.0, "time_to_first_update_s": 5.0,
                             "examples_per_sec_before": 700.0, "examples_per_sec_during": 300.0,
                             "examples_per_sec_after": 650.0, "closure_results_lost": 1, "updates_without_result": 2}]}
    point = Point(config=config, runs=[Run("/x/r", config, cluster, [])])
    (row,) = [line for line in "\n".join(convergence_section.section([point])).splitlines()
              if line.startswith("| PS bounded s=1 ")]
    assert "| 0.910 | 2560 | 3.0 (1/1) | 30 |" in row and "| 2.0 | 0.50 | 1.0 | 0.20 |" in row  # images at the last point
    (row,) = [line for line in "\n".join(recovery_section.section([point])).splitlines() if line.startswith("| r ")]
    assert "worker_1 kill after step 5 | – | 4.0 | 5.0 | – | 700 | 300 | 650 | 1 | 2 |" in row  # elastic-only columns empty


def test_bytes_per_step_table_puts_local_and_slurm_hosts_side_by_side(tmp_path, monkeypatch):
    """Units of |w|: a separate ps host at N·|w| and workers at |w|, local hosts found through
    plan.json and network.json, Slurm nodes through the record's slurm_task_nodes."""
    from tools.report import traffic_section
    from tools.report.aggregate import Point
    from tools.rundirs.runs import Run

    w = 1_000_000
    monkeypatch.setattr(traffic_section, "w_bytes", lambda config: w)
    base = {"strategy": "parameter_server", "num_workers": 2, "ps_placement": "separate", "network": "emulated",
            "link_bandwidth": "100mbit", "model": "tiny", "num_classes": 25000, "image_size": 32}
    local_dir = tmp_path / "local"
    local_dir.mkdir()
    plan = {"tasks": [{"role": "chief", "index": 0, "host": "10.0.0.2"}, {"role": "worker", "index": 0,
                       "host": "10.0.0.2"}, {"role": "worker", "index": 1, "host": "10.0.0.3"},
                      {"role": "ps", "index": 0, "host": "10.0.0.4"}]}
    (local_dir / "plan.json").write_text(json.dumps(plan))
    (local_dir / "network.json").write_text(json.dumps({"hosts": [{"name": f"h{i}", "address": f"10.0.0.{i + 2}"}
                                                                  for i in range(3)]}))

    def traffic(**hosts):
        return {h: {"tx_bytes_per_step": tx * w, "rx_bytes_per_step": rx * w} for h, (tx, rx) in hosts.items()}

    local = Run(str(local_dir), {**base, "launcher": "local"},
                {"status": "ok", "link_traffic": traffic(h0=(1.0, 1.1), h1=(0.9, 1.1), h2=(2.0, 2.1))}, [])
    slurm = Run(str(tmp_path / "slurm"), {**base, "launcher": "slurm"},
                {"status": "ok", "slurm_task_nodes": {"chief_0": "h0", "ps_0": "h1", "worker_0": "h2",
                                                      "worker_1": "h3"},
                 "link_traffic": traffic(h0=(0.01, 0.01), h1=(2.04, 2.08), h2=(1.0, 1.0), h3=(1.02, 1.0))}, [])
    lines = traffic_section.section([Point({**base, "launcher": "local"}, [local]),
                                    Point({**base, "launcher": "slurm"}, [slurm])])
    rows = [line.split(" | ")[2:] for line in "\n".join(lines).splitlines() if line.startswith("| parameter_server")]
    assert rows == [["ps host", "N = 2", "2.00 / 2.10", "2.04 / 2.08 |"],
                    ["each worker host (mean)", "1", "0.95 / 1.10", "1.01 / 1.00 |"]]
    assert "| reference (\\|w\\|) |" in "\n".join(lines)
    # a recommender's tables move the rows its steps touch, not |w|: its runs are the tables section's
    sparse = Run(str(local_dir), {**base, "launcher": "local", "model": "dlrm"},
                 {**local.cluster, "sparse": {"unique_rows_per_shard": [10.0, 12.0]}}, [])
    assert traffic_section.section([Point({**base, "launcher": "local", "model": "dlrm"}, [sparse])]) == []


def test_slurm_nodes_is_blank_off_slurm():
    local = aggregate.identity({"strategy": "multi_worker_mirrored", "num_workers": 2, "launcher": "local",
                                "slurm_nodes": 1})
    slurm = aggregate.identity({"strategy": "multi_worker_mirrored", "num_workers": 2, "launcher": "slurm",
                                "slurm_nodes": 0})
    assert local["slurm_nodes"] is None and slurm["slurm_nodes"] == 0
