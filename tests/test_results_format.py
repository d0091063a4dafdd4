"""docs/results.md documents every field tfbench writes (tests/results_doc.py reads it): records
built by the record builders the way a run builds them (synchronous, parameter-server, Horovod
elastic, failed, merged by hand), environment.json as a run directory gets it, and the fixed
columns of results.csv. No TensorFlow: tests/tfrun.py checks every real run's records as well."""
import csv
import hashlib
import io
import os

import pytest
from results_doc import documented, undocumented, undocumented_in_run

import tfbench.config as config_lib
from cluster import merge
from cluster.plan.topology import make_plan
from tfbench.app.run_setup import prepare_run_dir
from cluster.supervision import outcome
from cluster.supervision.status import StatusLine
from report_runs import write_run
from tfbench.config import RunConfig
from tfbench.results import records, rundir
from tools.report import results_csv
from tools.rundirs.runs import find_runs

FIELDS = documented()
# results.csv's columns other than the config ones, per format version (sha256 of their names
# joined by commas). Changing them means a new records.SCHEMA_VERSION, its hash here, and its
# columns in docs/results.md.
CSV_COLUMNS = {1: "181814e56cddb6a3c512ebb391b890b2e1d5ec5bdd24c8ae59e1bd10a6b0aae8", 2: "c0cbb51e8fd91fa2f5d2b9f1bad42f1aadf1cc65f6c8a5b8a0d90c36ff0e2648",
               3: "e1fef4bfe9627d5663a47cd1d3fe8fa9609523fa4c681e0d91444123c6f38bfa"}
T0 = 1_700_000_000.0
STALENESS = {"updates": 4, "mean": 0.5, "max": 1, "histogram": {"0": 2, "1": 2}}
CONVERGENCE = {"dataset": "digits", "eval_every": 2, "points": [{"step": 1, "accuracy": 0.5}], "final_accuracy": 0.5,
               "final_loss": 1.0, "best_accuracy": 0.5, "target_accuracy": None, "time_to_accuracy_s": None,
               "updates_to_accuracy": None, "images_to_accuracy": None, "reached": None,
               "evaluation_pauses_s": 0.1, "evaluation_pauses_training": True, "definition": "..."}


def task(role, index, extra=None, steps=4, step_s=0.1):
    starts = [T0 + k * step_s for k in range(steps)]
    facts = {"pid": 100 + index, "host": "localhost", "cores": [index], "shares_cores_with": [], "intra_threads": 1,
             "inter_threads": 1, "num_warmup_steps": 2}
    return records.task_record(run_id="r", role=role, index=index, examples_per_step=8, step_times_s=[step_s] * steps,
                               step_start_wall=starts, extra={**facts, **(extra or {})})


def monitor_summary(names):
    series = [{"time": T0 + t * 0.1, "cpu_percent": 90.0, "rss_mb": 500.0, "net_tx_bytes": 1000.0 * t,
               "net_rx_bytes": 2000.0 * t} for t in range(6)]
    return {"tasks": {n: {"role": n.split("_")[0], "index": 0, "pids": [1], "samples": 6, "cpu_percent_mean": 90.0,
                          "cpu_percent_normalized_mean": 90.0, "rss_mb_peak": 500.0, "net_tx_bytes": 5000.0,
                          "net_rx_bytes": 10000.0, "series": [dict(s, task=n, role=n.split("_")[0]) for s in series]}
                      for n in names},
            "workers_mean": {"tasks": 2, "cpu_percent_mean": 90.0}, "host": {"samples": 6, "cpu_percent_mean": 95.0,
                                                                              "mem_used_mb_peak": 900.0, "net": {}},
            "interval_s": 0.1, "network_source": "SocketTraffic", "samples": 6}


SYNC = [task("worker", 0, {"step_computed_wall": [T0 + 0.05 + 0.1 * k for k in range(4)]}),
        task("worker", 1, {"step_computed_wall": [T0 + 0.05 + 0.1 * k for k in range(4)]})]
PS = [task("worker", 0, {"idleness": 0.2, "staleness": STALENESS, "staleness_per_update": [0, 1, 0, 1]}),
      task("worker", 1, {"idleness": 0.3, "staleness": STALENESS, "staleness_per_update": [1, 0, 1, 0]}),
      task("chief", 0, {"counts_toward_cluster": False, "cluster_steps": True, "updates": 8, "convergence": CONVERGENCE,
                        "staleness": {"all": STALENESS, "worker_0": STALENESS}, "clock_staleness": STALENESS,
                        "bound_waits": 1, "ps_staleness_bound": 2, "step_label": "2 updates",
                        "step_definition": "2 updates (coordinator)"})]
ELASTIC = [task("worker", 0, {"step_index": [2, 3, 4, 5], "step_ranks": [2, 2, 1, 2]}),
           task("worker", 1, {"step_index": [2, 3, 5], "step_ranks": [2, 2, 2]}, steps=3)]


def run_dir(tmp_path, task_records, name="r"):
    config = RunConfig(strategy="parameter_server", num_workers=2, logdir=str(tmp_path), run_id=name)
    run = prepare_run_dir(config, make_plan(config))
    for r in task_records:
        records.append(run.results, r)
    return run, config


@pytest.mark.parametrize("tasks", [SYNC, PS, ELASTIC], ids=["sync", "ps", "elastic"])
def test_records_of_a_finished_run_are_documented(tmp_path, tasks):
    run, config = run_dir(tmp_path, tasks)
    extra = {"resources": monitor_summary([f"{t['role']}_{t['index']}" for t in tasks] + ["ps_0"]),
             "network": "local", "grpc_isolation": {"netns": "n", "reachable_from": "..."},
             "faults": [{"task": "worker_1", "kind": "kill", "step": 2, "wall": T0}], "faults_not_applied": []}
    result = outcome.report(outcome.Ending("ok"), 0, run, config, extra, 1.0, StatusLine(io.StringIO()))
    cluster = result.cluster_record
    assert result.ok and cluster["resources"]["scope"].startswith("measured window")
    if tasks is PS:  # what the coordinator's and the workers' records lift into the cluster record
        lifted = {"updates_per_sec", "staleness", "clock_staleness", "idleness", "convergence", "bound_waits"}
        assert lifted <= set(cluster)
    assert undocumented_in_run(run.path) == []
    written = records.read(run.results)
    assert {r["schema_version"] for r in written} == {records.SCHEMA_VERSION} and len(written) == len(tasks) + 1


def test_a_failed_record_and_a_merged_one_are_documented(tmp_path):
    run, config = run_dir(tmp_path, SYNC[:1])
    failed = outcome.report(outcome.Ending("failed", "worker_1", "worker_1 exited with code 1"), 0, run, config,
                            {"resources": monitor_summary(["worker_0", "worker_1"]), "launcher": "slurm",
                             "slurm_job_id": "7", "slurm_job_state": "FAILED", "slurm_exit_code": "1:0",
                             "slurm_task_nodes": {"worker_0": "n1"}}, 1.0, StatusLine(io.StringIO()))
    assert failed.cluster_record["status"] == "failed"
    assert failed.cluster_record["schema_version"] == records.SCHEMA_VERSION
    merge.merge(rundir.RunDir(run.path), "kubernetes")
    assert undocumented_in_run(run.path) == []


def test_environment_json_carries_the_version_and_is_documented(tmp_path):
    run, _ = run_dir(tmp_path, [])
    environment = run.read_json("environment.json")
    assert environment["schema_version"] == records.SCHEMA_VERSION
    assert undocumented(environment, FIELDS["environment"]) == set()


def test_an_undocumented_field_is_caught():
    record = dict(SYNC[0], new_knob=1, stats=dict(SYNC[0]["stats"], p99_s=0.1))
    assert undocumented(record, FIELDS["task"]) == {"new_knob", "stats.p99_s"}


def test_the_document_names_each_field_once_and_states_the_version():
    for kind, fields in FIELDS.items():
        assert fields, kind
        assert len(fields) == len(set(fields)), [".".join(f) for f in fields if fields.count(f) > 1]
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "results.md"), encoding="utf-8") as f:
        text = f.read()
    assert f"Schema\nversion {records.SCHEMA_VERSION}." in text or f"Schema version {records.SCHEMA_VERSION}." in text


def test_csv_columns_are_fixed_and_documented(tmp_path):
    """The header is the version's column list, whatever the runs hold; docs/results.md lists it
    in order (config columns: one per RunConfig field)."""
    config_fields = list(config_lib.RunConfig.names())
    doc = [".".join(f) for f in FIELDS["csv"]]
    i = doc.index("<config field>")
    assert doc[:i] + config_fields + doc[i + 1:] == results_csv.columns()
    headers = []
    for name, kwargs in (("one", {}), ("ps", {"resources": monitor_summary(["worker_0", "ps_0"])})):
        root = tmp_path / name
        write_run(str(root), "a", "parameter_server" if name == "ps" else "multi_worker_mirrored", 1, 0.5, **kwargs)
        rows = results_csv.rows(find_runs(str(root)), {}, str(root))
        results_csv.write(str(root / "results.csv"), rows)
        with open(root / "results.csv", newline="") as f:
            table = list(csv.reader(f))
        headers.append(table[0])
        assert all(len(row) == len(table[0]) for row in table)
    assert headers[0] == headers[1] == results_csv.columns()
    assert headers[0][0] == "schema_version" and {row[0] for row in table[1:]} == {str(records.SCHEMA_VERSION)}
    fixed = [c for c in results_csv.columns() if c not in config_fields]
    assert hashlib.sha256(",".join(fixed).encode()).hexdigest() == CSV_COLUMNS[records.SCHEMA_VERSION], (
        "results.csv's columns changed: increment records.SCHEMA_VERSION and give its hash in CSV_COLUMNS")
    with pytest.raises(ValueError):  # a column outside the version's set cannot slip in
        results_csv.write(str(tmp_path / "x.csv"), [{"run_id": "a", "new_column": 1}])
