"""The rows a recommender's step touches (tfbench.perfmodel.sparse.laws) against a Monte-Carlo count of
the ids tfbench itself draws (tfbench.workloads.clicks, TensorFlow: slow), and what those rows cost
each strategy on the wire (tfbench.measure.sparse), against hand-computed values."""
import numpy as np
import pytest

from tfbench.config import RunConfig, strategy_traits
from tfbench.measure import sparse as sparse_wire
from tfbench.perfmodel.sparse import laws as sparse


@pytest.mark.slow
@pytest.mark.parametrize("rows,alpha,draws", [(1000, 0.0, 500), (100_000, 1.0, 256), (100_000, 1.2, 4096),
                                              (50, 0.8, 10_000), (2_000_000, 1.05, 2048)])
def test_expected_unique_rows_match_a_monte_carlo_count_of_tfbench_draws(rows, alpha, draws):
    from tfbench.framework.tf_import import tf
    from tfbench.workloads import clicks

    counts = [np.unique(clicks.zipf_values((rows,), alpha, [draws, 1, 1], tf.constant([i, 1], tf.int64))).size
              for i in range(200)]
    expected = sparse.expected_unique(rows, alpha, draws)
    assert np.mean(counts) == pytest.approx(expected, rel=0.01, abs=0.5)


def test_uniform_ids_follow_the_closed_form():
    rows, draws = 1000, 700
    assert sparse.expected_unique(rows, 0.0, draws) == pytest.approx(rows * (1 - (1 - 1 / rows) ** draws))
    assert sparse.expected_unique(rows, 0.0, 1) == pytest.approx(1.0)  # one id touches one row


@pytest.mark.slow
def test_the_workloads_own_counts_match_the_law():
    """A step's measured unique rows (the workload's facts) against E[unique] at B h draws, and the
    union of four workers' batches against E[unique] at 4 B h."""
    config = RunConfig(model="dlrm", strategy="multi_worker_mirrored", num_workers=4, batch_size=512,
                       embedding_tables=4, embedding_rows=20_000, ids_per_feature=2, zipf_alpha=1.0)
    facts = config.workload.step_facts(config)
    rows = config.workload.table_rows(config)
    one = sparse.expected_unique_tables(rows, 1.0, 512 * 2)
    assert np.mean(facts["unique_rows_per_shard"]) == pytest.approx(one, rel=0.03)
    assert facts["unique_rows_all_shards"] == pytest.approx(sparse.expected_unique_tables(rows, 1.0, 4 * 512 * 2),
                                                            rel=0.03)
    assert facts["lookups_per_step"] == 512 * 4 * 2 and facts["row_bytes"] == 64


def test_the_records_rule_and_the_model_count_the_same_index_bytes():
    """tfbench.measure may not import the model (docs/architecture.md): each states the sizes; they agree."""
    assert (sparse_wire.INDEX_BYTES, sparse_wire.RANGE_INDEX_BYTES) == (sparse.INDEX_BYTES, sparse.RANGE_INDEX_BYTES)


def test_wire_bytes_per_strategy_by_hand():
    assert sparse.allgather_bytes(4, 1000, 64) == 3 * 1000 * 72
    facts = {"unique_rows_per_shard": [1000, 1200], "padded_rows_per_shard": 1250, "row_bytes": 64,
             "rows": [100, 100], "embedding_dim": 16}
    mwms = sparse_wire.wire(facts, strategy_traits.of("multi_worker_mirrored"), False)
    assert mwms["per_host_step_bytes"] == pytest.approx(1 * 1250 * 72) and "padded" in mwms["rule"]
    gatherv = sparse_wire.wire(facts, strategy_traits.of("horovod"), False)
    assert gatherv["per_host_step_bytes"] == pytest.approx(1 * 1100 * 72) and "padded" not in gatherv["rule"]
    dense = sparse_wire.wire(facts, strategy_traits.of("horovod"), True)
    assert dense["per_host_step_bytes"] == pytest.approx(0.5 * 2 * 4 * 200 * 16) and "dense" in dense["rule"]
    ps = sparse_wire.wire(facts, strategy_traits.of("parameter_server"), False)
    assert ps["per_worker_step_bytes"] == pytest.approx(1100 * 144) and ps["ps_hosts_bytes_per_global_step"] == \
        pytest.approx(2 * 1100 * 144)
    hybrid = sparse_wire.wire(facts, strategy_traits.of("hybrid"), False)  # rows in and out, one int32 index
    assert hybrid["per_worker_step_bytes"] == pytest.approx(1100 * (64 + 64 + 4)) and "indices sent once" in \
        hybrid["rule"]
    text = sparse_wire.line(dict(facts, tables=2, lookups_per_step=64, unique_rows_all_shards=1900, wire_by_rule=ps))
    assert "1000, 1200 per worker" in text and "by the rule (parameter server" in text
