"""The recommender workload (tfbench.workloads.recommender): flags checked before anything starts,
a replicated table that cannot fit refused with the strategy that can run it, and each strategy's
sparse path on the shared runs of tests/clusters.py (records in examples, the rows a step touches,
what each ps serves, the tables kept out of the dense communication plan)."""
import json
import os

import pytest

from conftest import run_cli
from tfbench.config import RunConfig, validate
from tfbench.config.errors import ConfigError
from tfbench.workloads import recommender
from tfrun import cluster_record, task_records

MODELS_2E9 = ["--model=dlrm", "--strategy=multi_worker_mirrored", "--num_workers=2", "--embedding_rows=2000000000",
              "--embedding_dim=64"]


def test_a_replicated_table_that_cannot_fit_is_refused_naming_the_parameter_server(tmp_path):
    logdir = tmp_path / "runs"
    proc = run_cli(*MODELS_2E9, f"--logdir={logdir}", timeout=60)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "replicates dlrm's 4096.0 GB of embedding tables on every worker" in lines[0]
    assert "--strategy=parameter_server or hybrid shards the tables over its ps" in lines[0]
    assert not logdir.exists()


@pytest.mark.parametrize("flags,message", [
    (dict(model="dlrm", image_size=64), "--image_size applies to image workloads only"),
    (dict(model="resnet50", embedding_rows=10), "--embedding_rows applies to recommender workloads only"),
    (dict(model="dlrm_criteo", embedding_tables=4), "--embedding_tables applies to"),
    (dict(model="dlrm", embedding_scale=0.5), "--embedding_scale applies to"),
    (dict(model="dlrm", zipf_alpha=-1.0), r"--zipf_alpha must be 0 \(uniform\) or more"),
    (dict(model="dlrm", ids_per_feature=0), "--ids_per_feature must be at least 1"),
    (dict(model="dlrm", embedding_tables=0), "--embedding_tables must be 1..1024"),
    (dict(model="dlrm", id_layout="other"), "--id_layout='other' is unknown; choose hashed or hot_first"),
    (dict(model="dlrm", target_auc=1.5), r"--target_auc is a held-out AUC in \(0, 1\]"),
    (dict(model="resnet50", id_layout="hot_first"), "--id_layout applies to recommender workloads only"),
    (dict(model="resnet50", target_auc=0.7), "--target_auc applies to recommender workloads only"),
    (dict(model="dlrm", optimizer="adam"), "--optimizer='adam' is unknown; choose sgd or sgd_v2"),
])
def test_bad_recommender_flags_are_one_line(tmp_path, flags, message):
    with pytest.raises(ConfigError, match=message) as e:
        validate(RunConfig(logdir=str(tmp_path), **flags))
    assert "\n" not in str(e.value)


def test_tables_and_parameters_are_closed_forms():
    config = RunConfig(model="dlrm", embedding_tables=3, embedding_rows=1000, embedding_dim=8, dense_features=5)
    workload = config.workload
    assert workload.table_rows(config) == (1000,) * 3 and workload.table_bytes(config) == 4 * 3 * 1000 * 8
    # bottom 5-64-32-8, top (8 + 4*3/2 = 14)-64-32-1
    dense = (6 * 64 + 65 * 32 + 33 * 8) + (15 * 64 + 65 * 32 + 33 * 1)
    assert workload.dense_params(config) == dense
    assert workload.memory_figures(config)["params"] == 3 * 1000 * 8 + dense
    criteo = RunConfig(model="dlrm_criteo", embedding_scale=1.0)
    assert sum(criteo.workload.table_rows(criteo)) == sum(recommender.CRITEO_KAGGLE_ROWS) == 33_762_591
    assert "26 Criteo tables x 1 (33.76 M rows)" in criteo.workload.describe(criteo)


@pytest.mark.parametrize("flags", [("--model=dlrm", "--id_layout=other"), ("--model=dlrm", "--target_auc=1.5"),
                                   ("--model=resnet50", "--zipf_alpha=1.2"), ("--model=tiny", "--target_auc=0.7"),
                                   ("--model=tiny", "--id_layout=hot_first")])
def test_bad_recommender_input_exits_2_with_one_line_and_writes_nothing(tmp_path, flags):
    logdir = tmp_path / "runs"
    proc = run_cli(*flags, f"--logdir={logdir}", timeout=60)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("tfbench: error: "), proc.stderr
    assert not logdir.exists()


@pytest.mark.slow
def test_every_shard_and_step_gets_its_own_ids_and_the_same_ones_every_time():
    config = RunConfig(model="dlrm", strategy="multi_worker_mirrored", num_workers=2, batch_size=64)
    first = config.workload.touched_rows(config)
    again = RunConfig.from_dict(config.to_dict())
    again = again.workload.touched_rows(again)
    assert all((a == b).all() for x, y in zip(first, again) for a, b in zip(x, y))
    assert any(not (a.size == b.size and (a == b).all()) for a, b in zip(first[0], first[1]))
    later = config.workload.touched_rows(config, 1)
    assert any(not (a.size == b.size and (a == b).all()) for a, b in zip(first[0], later[0]))
    assert all(ids.max() < 100_000 for shard in first for ids in shard)


@pytest.mark.slow
def test_hashed_ids_scatter_the_hot_values_and_hot_first_piles_them_up():
    """The same values either way (hashing permutes rows, the law over values stays), so the same
    number of rows per step; hot_first puts the hottest in a table's first rows, hashed anywhere."""
    base = dict(model="dlrm", strategy="multi_worker_mirrored", num_workers=2, batch_size=256, zipf_alpha=1.2,
                embedding_tables=2)
    hashed, first = (RunConfig(**base, id_layout=layout) for layout in ("hashed", "hot_first"))
    rows_hashed, rows_first = (c.workload.touched_rows(c) for c in (hashed, first))
    assert [[ids.size for ids in shard] for shard in rows_hashed] == [[ids.size for ids in shard] for shard in rows_first]
    quarter = 100_000 // 4
    low = [sum(int((ids < quarter).sum()) for ids in shard) / sum(ids.size for ids in shard)
           for rows in (rows_hashed, rows_first) for shard in rows]
    assert max(low[:2]) < 0.4 < 0.6 < min(low[2:])  # a quarter of the rows: about a quarter of hashed ids


# ---- the shared runs (TensorFlow) -------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("scenario,rule", [("dlrm_mwms", "all-gather"), ("dlrm_horovod", "all-gather"),
                                           ("dlrm_ps_sync", "parameter server"),
                                           ("dlrm_ps_async", "parameter server")])
def test_every_strategy_counts_examples_and_the_rows_a_step_touches(clusters, scenario, rule):
    launched = clusters[scenario]
    cluster = cluster_record(launched.run)
    assert cluster["unit"] == "examples" and cluster["examples_per_sec"] > 0 and "images_per_sec" not in cluster
    assert cluster["workload"]["tables"] == 4 and cluster["workload"]["table_bytes"] == 4 * 2000 * 8 * 4
    sparse = cluster["sparse"]
    per_shard = sparse["unique_rows_per_shard"]
    assert len(per_shard) == 2 and 0 < per_shard[0] <= 16 * 4 and max(per_shard) <= sparse["unique_rows_all_shards"]
    assert rule in sparse["wire_by_rule"]["rule"]
    assert "examples/s" in launched.out and "sparse: 4 tables, 64 lookups per worker step" in launched.out
    for task in task_records(launched.run).values():
        plan = task.get("comm_plan") or {}
        if plan:  # the tables' rows travel apart: the dense plan holds the MLPs only
            assert plan["bytes_per_step"] < 4 * 2000 * 8


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["dlrm_ps_sync", "dlrm_ps_async"])
def test_each_ps_serves_the_rows_of_its_shards(clusters, scenario):
    launched = clusters[scenario]
    coordinator = task_records(launched.run)["chief_0"]
    rows = coordinator["ps_rows"]
    assert sorted(rows) == ["ps:0/CPU:0", "ps:1/CPU:0"]
    with open(os.path.join(launched.run, "config.json")) as f:
        config = RunConfig.from_dict(json.load(f))
    # every worker's rows, split at each table's middle row (the fixed partitioner, two shards), the mean
    # over the steps the facts count
    steps = [config.workload.touched_rows(config, k) for k in range(config.workload.fact_steps)]
    low = sum(int((ids < 1000).sum()) for touched in steps for shard in touched for ids in shard) / len(steps)
    assert rows["ps:0/CPU:0"]["rows_per_global_step"] == pytest.approx(low)
    assert rows["ps:0/CPU:0"]["rows_per_global_step"] + rows["ps:1/CPU:0"]["rows_per_global_step"] == pytest.approx(
        sum(cluster_record(launched.run)["sparse"]["unique_rows_per_shard"]), abs=0.02)
    counts = [entry["rows_per_global_step"] for entry in rows.values()]
    assert cluster_record(launched.run)["ps_row_skew"] == pytest.approx(max(counts) / (sum(counts) / len(counts)))
    assert "embedding rows served per global step" in launched.out and "(ps_row_skew)" in launched.out
