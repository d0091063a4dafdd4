"""--strategy=hybrid: embedding tables' row ranges on the ps, read and updated there by Horovod ranks
that all-reduce every other gradient. Its path is checked in the traced step (the row ops on the ps
devices, the dense all-reduce on the rank), its records against independent counts (the rows each
ps serves, the dense bytes), and its weights against a single device (tests/test_aggregation.py);
bad input is one line, exit 2, before anything is written."""
import json
import math

import pytest

from conftest import run_cli
from strategies.hybrid import records
from tfbench.config import RunConfig, knobs
from tfbench.perfmodel.sparse import ranges
from tfrun import cluster_record, task_records

HYBRID2 = ["--strategy=hybrid", "--num_workers=2"]
BAD = [
    (HYBRID2 + ["--ps_partitioner=fixed"], "--ps_partitioner applies to --strategy=parameter_server only"),
    (HYBRID2 + ["--ps_sync"], "--ps_sync applies to --strategy=parameter_server only"),
    (HYBRID2 + ["--ps_staleness_bound=1"], "--ps_staleness_bound applies to --strategy=parameter_server only"),
    (HYBRID2 + ["--horovod_fusion_threshold_mb=4"], "--horovod_fusion_threshold_mb applies to --strategy=horovod"),
    (HYBRID2 + ["--horovod_elastic"], "--horovod_elastic applies to --strategy=horovod only"),
    (HYBRID2 + ["--checkpoint_every=2"], "--checkpoint_every applies to --strategy=multi_worker_mirrored or"),
    (HYBRID2 + ["--precision=bf16"], "plain SGD in fp32; --precision=bf16 is not supported"),
    (HYBRID2 + ["--xla"], "leave out --xla"),
    (HYBRID2 + ["--num_ps=-1"], "--num_ps must be 0 or more"),
    (HYBRID2 + ["--hybrid_shard_rule=mod"], "--hybrid_shard_rule='mod' is unknown; choose rotated, aligned"),
    (["--strategy=horovod", "--num_workers=2", "--hybrid_shard_rule=aligned"],
     "--hybrid_shard_rule applies to --strategy=hybrid only"),
    (["--strategy=parameter_server", "--hybrid_shard_rule=aligned"],
     "--hybrid_shard_rule applies to --strategy=hybrid"),
]


@pytest.mark.parametrize("args,expected", BAD)
def test_bad_input_is_one_line_before_anything_is_written(tmp_path, args, expected):
    logdir = tmp_path / "runs"
    result = run_cli(*args, f"--logdir={logdir}")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("tfbench: error: ") and expected in lines[0], lines[0]
    assert not logdir.exists() or not any(logdir.iterdir())


def test_kubernetes_pods_meet_as_ranks_through_the_wrapper_and_the_workers_finish_the_jobset(tmp_path):
    """Every variant starts the tasks through cluster.k8s.rendezvous; Horovod's host list is one rank per
    worker pod; the JobSet succeeds when the workers do (the ps serve until stopped)."""
    import yaml

    result = run_cli(*HYBRID2, "--model=dlrm", "--num_ps=2", "--run_id=hyb", f"--out_dir={tmp_path / 'k8s'}",
                     module="cluster.k8s")
    assert result.returncode == 0, result.stderr
    for name in ("jobset.yaml", "tfjob.yaml", "indexed-jobs.yaml"):
        with open(tmp_path / "k8s" / name, encoding="utf-8") as f:
            text = f.read()
        assert text.count("cluster.k8s.rendezvous") == 2, name  # the pods of each role: ps and worker
    with open(tmp_path / "k8s" / "jobset.yaml", encoding="utf-8") as f:
        objects = list(yaml.safe_load_all(f))
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    plan = json.loads(config_map["data"]["plan.json"])
    workers = sorted((t for t in plan["tasks"] if t["role"] == "worker"), key=lambda t: t["horovod_rank"])
    assert plan["horovod_hosts"] == ",".join(f"{t['host']}:1" for t in workers)
    assert jobset["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["worker"]}


@pytest.mark.parametrize("rows,num_ps", [(2000, 2), (7, 3), (2, 4), (1, 1)])
def test_every_row_lives_in_exactly_one_range(rows, num_ps):
    sizes = ranges.sizes(rows, num_ps)
    assert sum(sizes) == rows and all(s > 0 for s in sizes) and len(sizes) == min(rows, num_ps)
    assert max(sizes) - min(sizes) <= 1


def test_the_flag_takes_the_rules_the_shard_rule_knows():
    assert knobs.SHARD_RULES == ranges.RULES


def test_the_rotated_rule_spreads_the_first_ranges_and_aligned_keeps_them_on_ps_0():
    first = {rule: {ranges.ps_of(t, 0, 4, rule) for t in range(8)} for rule in ("rotated", "aligned")}
    assert first == {"rotated": {0, 1, 2, 3}, "aligned": {0}}
    for rule in ("rotated", "aligned"):  # each table's ranges on distinct ps
        assert all(len({ranges.ps_of(t, j, 4, rule) for j in range(4)}) == 4 for t in range(8))


# ---- the shared run (TensorFlow) ------------------------------------------------------------------
def workers(launched):
    return [t for name, t in sorted(task_records(launched.run).items()) if name.startswith("worker_")]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["dlrm_hybrid", "dlrm_hybrid_emulated"])
def test_rows_are_read_and_updated_on_the_ps_and_the_dense_gradients_all_reduced(clusters, scenario):
    """The same protocol with the compute emulated (a wait once the rows are pulled, then gradients
    of the dense variables' and the rows' shapes): only the forward and backward pass is gone."""
    launched = clusters[scenario]
    config = launched.config
    ranks = workers(launched)
    assert len(ranks) == 2
    for rank in ranks:
        graph = rank["step_graph"]
        # each ps's stack of the 4 tables' ranges it holds: one gather and one scatter-add there, however
        # many tables; on the rank only gathers of tensors (the pulled rows to each id), never of a variable
        on_variables = {op: n for op, n in graph["row_ops"].items() if op.startswith("Resource")}
        assert on_variables == {"ResourceGather@ps": 1 * 2, "ResourceScatterAdd@ps": 1 * 2}
        assert {op.split("@")[1] for op in graph["row_ops"]} == {"ps", f"rank{rank['index']}"}
        # to each ps one tensor of its ranges' row indices and their counts (once: the push scatters
        # at the pull's) and one of the rows' updates; from each ps one tensor of rows: however many
        # tables, 2 messages to a ps and 1 back a step
        job = f"rank{rank['index']}"
        assert graph["crossings"] == {f"{job}->ps": 2 * 2, f"ps->{job}": 1 * 2}
        # every tensor to the ps leaves after the wait (the one-value all-reduce that opens the step):
        # the pull's requests of every rank at once; the rows' updates after the dense all-reduce too
        assert graph["sent_after"][f"{job}->ps"] == {"HorovodAllreduce": 2 * 2, "HorovodGroupedAllreduce": 1 * 2}
        assert not graph["table_sized"]  # no tensor as large as a table's range: the rows it touches only
        assert set(graph["collectives"]) == {"HorovodGroupedAllreduce", "HorovodAllreduce"}
        # the dense gradients in one grouped all-reduce, the wait that opens the step a one-value one
        assert graph["collectives"]["HorovodAllreduce"] == [[[1]]]
        asked = rank["placement"]["requested_op_devices"]
        assert asked.get("ps:0/CPU:0", 0) >= 2 and asked.get("ps:1/CPU:0", 0) >= 2  # each stack read and updated
        assert rank["tables"].startswith("on the ps") and rank["num_ps"] == 2
        assert rank["allreduce_plan"]["bytes_per_step"] == 4 * rank["workload"]["dense_params"]
        assert set(rank["hybrid_split_ms"]) == {"wait", "pull", "compute", "allreduce", "push", "apply"}
        assert 0 < sum(rank["hybrid_split_ms"].values()) <= 1e3 * rank["stats"]["mean_s"]
        assert rank["compute"]["mode"] == config["compute"]
        if config["compute"] == "emulated":  # the wait is the step's compute part, which a sleep never cuts short
            assert rank["hybrid_split_ms"]["compute"] >= config["compute_ms"]
    assert "step split, ms per step of each rank (tables on the ps)" in launched.out


@pytest.mark.slow
def test_rank_0_evaluates_on_the_tables_the_ps_hold(clusters):
    """Held-out evaluation runs outside the step: each Embedding layer pulls its own rows there."""
    launched = clusters["dlrm_hybrid"]
    first, second = workers(launched)
    points = first["convergence"]["points"]
    assert len(points) == 1 + launched.config["num_steps"]  # the measured window's start, then every step
    assert all(0.0 <= p["auc"] <= 1.0 and math.isfinite(p["loss"]) for p in points)
    assert "convergence" not in second or not second["convergence"]


@pytest.mark.slow
def test_each_ps_serves_the_rows_of_its_ranges(clusters):
    launched = clusters["dlrm_hybrid"]
    rank = workers(launched)[0]
    rows = rank["ps_rows"]
    config = RunConfig.from_dict(launched.config)
    # rotated over 2 ps: table t's lower half on ps t mod 2, its upper half on the other; the mean over
    # the steps the facts count
    steps = [config.workload.touched_rows(config, k) for k in range(config.workload.fact_steps)]
    on_ps0 = sum(int(((ids < 1000) if t % 2 == 0 else (ids >= 1000)).sum())
                 for touched in steps for shard in touched for t, ids in enumerate(shard)) / len(steps)
    assert rows["ps:0/CPU:0"]["rows_per_global_step"] == pytest.approx(on_ps0)
    served = [entry["rows_per_global_step"] for entry in rows.values()]
    assert sum(served) == pytest.approx(sum(cluster_record(launched.run)["sparse"]["unique_rows_per_shard"]), abs=0.02)
    assert rank["ps_row_skew"] == pytest.approx(max(served) / (sum(served) / len(served)))


@pytest.mark.slow
def test_a_model_without_tables_is_an_all_reduce_of_every_gradient(clusters):
    launched = clusters["hybrid_no_tables"]
    for rank in workers(launched):
        assert rank["tables"] == records.NO_TABLES
        assert "step_graph" not in rank  # no tables: nothing of them traced
        assert not any(device.startswith("ps:") for device in rank["placement"]["requested_op_devices"])
        assert "ps_rows" not in rank and rank["examples_per_sec"] > 0
