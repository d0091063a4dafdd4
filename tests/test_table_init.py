"""The recommender's tables are made as they are held (tfbench.models.dlrm.table_initializer): a
table, or a parameter server's shard of it, costs its own bytes while it is made, and no two shards
or tables start alike; counting a step's FLOPs (tfbench.measure.flops) makes no table at all."""
import json
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # builds tables in TensorFlow

BUILD_ONE_TABLE = """
import json, psutil
from tfbench.framework.tf_import import keras
from tfbench.models.dlrm import table_initializer, unique_embedding
keras.layers.Embedding(10, 4).build((None,))  # TensorFlow and Keras at work: their own memory is not the table's
process = psutil.Process()
before = process.memory_info().rss
unique_embedding({rows}, {dim}, "table_0", table_initializer(0, 0)).build((None,))
print(json.dumps(process.memory_info().rss - before))
"""


def test_making_a_table_holds_the_table_not_copies_of_it():
    """Keras' eager uniform draw left three table-sized tensors behind each table; a ps holding a
    shard twice or more its size cannot hold the tables it exists for."""
    rows, dim = 2_000_000, 16
    out = subprocess.run([sys.executable, "-c", BUILD_ONE_TABLE.format(rows=rows, dim=dim)], check=True,
                         capture_output=True, text=True)
    grown, table = json.loads(out.stdout.strip().splitlines()[-1]), rows * dim * 4
    assert table * 0.9 < grown < table * 2, f"{grown / 2**20:.0f} MiB grown for a {table / 2**20:.0f} MiB table"


def test_each_shard_and_table_is_its_own_draw_and_the_same_every_time():
    from tfbench.models.dlrm import table_initializer

    def shard(seed, table, first_row):
        return table_initializer(seed, table)((100, 4), "float32", partition_shape=(50, 4),
                                              partition_offset=(first_row, 0)).numpy()

    first, second = shard(0, 0, 0), shard(0, 0, 50)
    assert first.shape == (50, 4) and np.abs(first).max() <= 0.05
    assert not np.allclose(first, second)  # a table's two shards
    assert not np.allclose(first, shard(0, 1, 0))  # two tables
    assert not np.allclose(first, shard(1, 0, 0))  # two seeds
    np.testing.assert_array_equal(first, shard(0, 0, 0))
    whole = table_initializer(0, 0)((100, 4), "float32").numpy()
    assert whole.shape == (100, 4) and np.abs(whole).max() <= 0.05


def test_counting_the_flops_makes_no_table():
    """The coordinator counts a step's FLOPs after its run; a graph of 2e9-row tables (512 GB) would
    make them. The count must not change with the rows, and the parameters must."""
    from tfbench.config import RunConfig
    from tfbench.measure import flops

    small, huge = (flops.count_model(RunConfig(model="dlrm", embedding_rows=rows, embedding_dim=64))
                   for rows in (1000, 2_000_000_000))
    assert (huge["forward"], huge["train"]) == (small["forward"], small["train"]) and small["train"] > small["forward"]
    assert huge["params"] - small["params"] > 8 * 64 * (2_000_000_000 - 1000) * 0.99
