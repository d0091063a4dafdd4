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


def unique_embedding(rows: int, dim: int, name: str):
    """An Embedding layer whose lookup reads each distinct id of its input once."""
    from tfbench.framework.tf_import import keras, tf

    class UniqueEmbedding(keras.layers.Embedding):
        def call(self, inputs):
            ids = tf.cast(inputs, tf.int64)
            unique, position = tf.unique(tf.reshape(ids, [-1]))
            rows_ = sparse_rows(self.embeddings, unique)
            out = tf.gather(rows_, position)
            return tf.reshape(out, [-1, *inputs.shape[1:], self.output_dim])  # [B, h, D], h known

    return UniqueEmbedding(int(rows), dim, name=name)


def dlrm(table_rows: Sequence[int], dim: int, dense_features: int, ids_per_feature: int,
         bottom: Sequence[int], top: Sequence[int]):
    from tfbench.framework.tf_import import keras, tf

    dense_in = keras.Input((dense_features,), name="dense", dtype="float32")
    sparse_in = keras.Input((len(table_rows), ids_per_feature), name="sparse", dtype="int64")
    x = dense_in
    for i, units in enumerate(tuple(bottom) + (dim,)):
        x = keras.layers.Dense(units, activation="relu", name=f"bottom_{i}")(x)
    vectors = [x]
    for t, rows in enumerate(table_rows):
        looked_up = unique_embedding(rows, dim, f"table_{t}")(sparse_in[:, t, :])  # [B, h, D]
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
