"""Which variables of a tf_keras model are embedding tables: their gradients are IndexedSlices
(the rows a batch touched), so strategies exchange rows, not the whole variable."""
from __future__ import annotations

from typing import List, Set


def embedding_tables(model) -> List:
    """The model's embedding tables (a ShardedVariable under a parameter-server partitioner)."""
    from tfbench.framework.tf_import import keras

    return [layer.embeddings for layer in model.submodules if isinstance(layer, keras.layers.Embedding)]


def table_parts(model) -> Set[int]:
    """ids of every embedding table and of each of its shards (under a parameter-server
    partitioner a model's trainable variables are the shards of a ShardedVariable)."""
    return {id(part) for table in embedding_tables(model) for part in [table, *getattr(table, "variables", [])]}


def dense_variables(model) -> List:
    """The trainable variables that are not embedding tables (or their shards): their gradients are dense."""
    tables = table_parts(model)
    return [v for v in model.trainable_variables if id(v) not in tables]


def ids_per_example(model) -> dict:
    """{id of a table or of its shard: ids one example looks up in it} from each Embedding layer's
    input shape in a functional model: a bound on the rows a batch's gradient carries (batch x
    this); a table whose layer has no single input shape is left out (its bound is its rows)."""
    import math

    from tfbench.framework.tf_import import keras

    out = {}
    for layer in model.submodules:
        if not isinstance(layer, keras.layers.Embedding):
            continue
        try:
            shape = layer.input.shape  # one call of the layer: its symbolic input
        except (AttributeError, ValueError, RuntimeError):
            continue
        if any(d is None for d in shape[1:]):
            continue
        for part in [layer.embeddings, *getattr(layer.embeddings, "variables", [])]:
            out[id(part)] = math.prod(shape[1:])
    return out
