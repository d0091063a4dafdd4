"""A DLRM-like recommender (Naumov et al. 2019, facebookresearch/dlrm): dense features through a
bottom MLP, one embedding table per categorical feature (h ids per feature, summed), the pairwise
dot products of all those vectors (the feature interaction), a top MLP and one logit.

Each table is a tf_keras Embedding that looks up the batch's unique ids only (tf.unique, then a
gather back to every id), as production recommenders do: a table's gradient is then one row per
touched row (IndexedSlices), not one per lookup. Under ParameterServerStrategy its partitioner
shards the tables over the ps, and a step pulls and pushes the touched rows only; the all-reduce
strategies replicate the tables and exchange those rows (all-gather).
"""
from __future__ import annotations

from typing import Sequence


def sparse_rows(table, ids):
    """The rows `ids` of `table`, read where it lives and never whole: a parameter server's sharded
    table each shard's rows, stitched back in order; any other its sparse_read (ResourceGather), a
    mirrored table's on this replica's copy. tf.nn.embedding_lookup and tf.gather read a table that is
    no plain resource variable (MultiWorkerMirrored's MirroredVariable) whole, then gather: after a
    sparse update that read copies the table, every step."""
    from tfbench.framework.tf_import import tf

    if getattr(table, "variables", None):
        return tf.nn.embedding_lookup(table, ids)
    mine = getattr(table, "_get_on_device_or_primary", None)  # noqa: SLF001 - no public getter of a replica's copy
    return (mine() if mine else table).sparse_read(ids)


def table_initializer(seed: int, table: int):
    """Keras' default for an Embedding, uniform in ±0.05, drawn in one graph: making a table, or a
    parameter server's shard of it, holds its own bytes and no more. Keras' own initializer draws
    eagerly, op by op (the draw, its scaling, its shift: three table-sized tensors), so a ps making a
    2 GB shard held 6 GB. Each shard is drawn from (seed, table, its first row), whichever device
    makes it, so no two shards or tables start alike."""
    from tfbench.framework.tf_import import keras, tf

    @tf.function
    def draw(shape, key, dtype):
        return tf.random.stateless_uniform(shape, seed=key, minval=-0.05, maxval=0.05, dtype=dtype)

    class TableUniform(keras.initializers.Initializer):
        def __call__(self, shape, dtype=None, **kwargs):
            shape = kwargs.get("partition_shape", shape)  # a parameter server's shard: its own rows only
            first_row = (kwargs.get("partition_offset") or (0,))[0]
            key = tf.constant([seed * 1_000_003 + table, first_row], tf.int64)
            return draw(tf.constant(shape, tf.int64), key, tf.as_dtype(dtype or "float32"))

    return TableUniform()


def unique_embedding(rows: int, dim: int, name: str, initializer="uniform"):
    """An Embedding layer whose lookup reads each distinct id of its input once."""
    from tfbench.framework.tf_import import keras, tf

    class UniqueEmbedding(keras.layers.Embedding):
        def call(self, inputs):
            ids = tf.cast(inputs, tf.int64)
            unique, position = tf.unique(tf.reshape(ids, [-1]))
            rows_ = sparse_rows(self.embeddings, unique)
            out = tf.gather(rows_, position)
            return tf.reshape(out, [-1, *inputs.shape[1:], self.output_dim])  # [B, h, D], h known

    return UniqueEmbedding(int(rows), dim, name=name, embeddings_initializer=initializer)


def dlrm(table_rows: Sequence[int], dim: int, dense_features: int, ids_per_feature: int,
         bottom: Sequence[int], top: Sequence[int], seed: int = 0):
    from tfbench.framework.tf_import import keras, tf

    dense_in = keras.Input((dense_features,), name="dense", dtype="float32")
    sparse_in = keras.Input((len(table_rows), ids_per_feature), name="sparse", dtype="int64")
    x = dense_in
    for i, units in enumerate(tuple(bottom) + (dim,)):
        x = keras.layers.Dense(units, activation="relu", name=f"bottom_{i}")(x)
    vectors = [x]
    for t, rows in enumerate(table_rows):
        table = unique_embedding(rows, dim, f"table_{t}", table_initializer(seed, t))
        looked_up = table(sparse_in[:, t, :])  # [B, h, D]
        vectors.append(tf.reduce_sum(looked_up, axis=1))  # multi-hot: the h rows summed
    stacked = tf.stack(vectors, axis=1)  # [B, T + 1, D]
    dots = tf.matmul(stacked, stacked, transpose_b=True)  # [B, T + 1, T + 1]
    n = len(vectors)
    upper = [i * n + j for i in range(n) for j in range(i + 1, n)]  # each pair once
    pairs = tf.gather(tf.reshape(dots, [-1, n * n]), upper, axis=1)
    z = tf.concat([x, pairs], axis=1)
    for i, units in enumerate(top):
        z = keras.layers.Dense(units, activation="relu", name=f"top_{i}")(z)
    logit = keras.layers.Dense(1, name="logit")(z)
    return keras.Model({"dense": dense_in, "sparse": sparse_in}, logit, name="dlrm")
