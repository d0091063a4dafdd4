"""Recommender workloads: a DLRM-like model (tfbench.models.dlrm) on dense features and categorical
ids, counted in examples (one example: one user-item request with its click label).

What a step consumes: --dense_features floats and, for each of the T embedding tables, h ids
(--ids_per_feature, multi-hot) drawn from a Zipf law of exponent α (--zipf_alpha) over the table's
rows: row i (0-based) is drawn with probability ∝ (i + 1)^-α, so the hottest rows are the first
ones, as in click logs where a few ids take most lookups (α = 0: uniform). The ids, dense features
and labels of every shard are made with numpy from (seed, shard) before timing, like the synthetic
images, so that every strategy sees the same examples. The loss is binary cross-entropy of one
logit per example.

- `dlrm`: T tables of R rows × D dims (--embedding_tables, --embedding_rows, --embedding_dim), small
  MLPs (bottom 64-32-D, top 64-32-1): runs in seconds on 2 cores.
- `dlrm_criteo`: the 26 tables of Criteo's Kaggle display-advertising set as the reference DLRM
  uses them (facebookresearch/dlrm: 13 dense features, dimension 16, bottom MLP 512-256-64-16, top
  512-256-1), every table's rows × --embedding_scale (default 0.25: 8.4 M rows, 0.54 GB at dim 16;
  1.0 is the full 33.8 M rows, 2.2 GB) so that a replicated copy per worker fits this machine.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Dict, Optional, Sequence, Tuple

from tfbench.workloads.arguments import Arg, Arguments
from tfbench.workloads.base import Workload, WorkloadKind, need

# Rows of the 26 categorical features of Criteo's Kaggle set (facebookresearch/dlrm's day of counts).
CRITEO_KAGGLE_ROWS = (1461, 584, 10131227, 2202608, 306, 24, 12518, 634, 4, 93146, 5684, 8351593, 3195, 28, 14993,
                      5461306, 11, 5653, 2173, 4, 7046547, 18, 16, 286181, 105, 142572)
# The flags only recommenders read: a new one is one line here (read as config.<name>), its range in check().
ARGUMENTS = Arguments("Recommender (--model=dlrm, dlrm_criteo)", (
    Arg("integer", "embedding_tables", 8, "dlrm: embedding tables T, one per categorical feature."),
    Arg("integer", "embedding_rows", 100000, "dlrm: rows R of every table."),
    Arg("integer", "embedding_dim", 16, "Dimensions D of every row (and of the bottom MLP's output)."),
    Arg("integer", "ids_per_feature", 1, "Ids h per categorical feature and example (multi-hot; their rows are summed)."),
    Arg("float", "zipf_alpha", 1.0, "Ids drawn from a Zipf law of this exponent over a table's rows, the first rows "
                                     "the hottest (0: uniform)."),
    Arg("integer", "dense_features", 13, "Dense input features of the bottom MLP."),
    Arg("float", "embedding_scale", 0.25, "dlrm_criteo: every Criteo Kaggle table's rows times this (1: 33.8 M rows, "
                                          "2.2 GB at dimension 16)."),
))
FLAGS = ARGUMENTS.names
CLICK_RATE = 0.25  # share of positive labels (Criteo's Kaggle set: about 26%)
MAX_TABLES = 1024


@dataclasses.dataclass(frozen=True)
class RecommenderWorkload(Workload):
    unit: str = "examples"
    inputs: str = "dense features and categorical ids"
    kind: str = "recommender"
    bottom: Tuple[int, ...] = (64, 32)
    top: Tuple[int, ...] = (64, 32)
    criteo: bool = False  # the tables are Criteo's, scaled by --embedding_scale
    own_flags: Tuple[str, ...] = FLAGS

    # ---- the tables -----------------------------------------------------------------------
    def table_rows(self, config) -> Tuple[int, ...]:
        if self.criteo:
            return tuple(max(1, round(rows * config.embedding_scale)) for rows in CRITEO_KAGGLE_ROWS)
        return (config.embedding_rows,) * config.embedding_tables

    def table_bytes(self, config) -> int:
        """fp32 bytes of every table (what an all-reduce strategy replicates on each worker)."""
        return 4 * sum(self.table_rows(config)) * config.embedding_dim

    def dense_params(self, config) -> int:
        """Parameters of the MLPs (everything but the tables)."""
        widths = [config.dense_features, *self.bottom, config.embedding_dim]
        params = sum((a + 1) * b for a, b in zip(widths, widths[1:]))
        n = len(self.table_rows(config)) + 1
        top = [config.embedding_dim + n * (n - 1) // 2, *self.top, 1]
        return params + sum((a + 1) * b for a, b in zip(top, top[1:]))

    # ---- the Workload interface -------------------------------------------------------------
    def check(self, config) -> None:
        need(1 <= config.embedding_tables <= MAX_TABLES,
             f"--embedding_tables must be 1..{MAX_TABLES}, got {config.embedding_tables}")
        need(config.embedding_rows >= 1, f"--embedding_rows must be at least 1, got {config.embedding_rows}")
        need(config.embedding_dim >= 1, f"--embedding_dim must be at least 1, got {config.embedding_dim}")
        need(config.ids_per_feature >= 1, f"--ids_per_feature must be at least 1, got {config.ids_per_feature}")
        need(config.zipf_alpha >= 0, f"--zipf_alpha must be 0 (uniform) or more, got {config.zipf_alpha:g}")
        need(config.dense_features >= 1, f"--dense_features must be at least 1, got {config.dense_features}")
        need(config.embedding_scale > 0, f"--embedding_scale must be positive, got {config.embedding_scale:g}")

    def describe(self, config) -> str:
        rows = self.table_rows(config)
        tables = (f"{len(rows)} Criteo tables x {config.embedding_scale:g} ({sum(rows) / 1e6:.2f} M rows)"
                  if self.criteo else f"{len(rows)} tables x {rows[0]} rows")
        return (f"{tables} x {config.embedding_dim} dims ({self.table_bytes(config) / 1e6:.1f} MB), "
                f"{config.ids_per_feature} id(s)/feature, zipf {config.zipf_alpha:g}")

    def key(self, config) -> str:
        return (f"{self.name}|{','.join(map(str, self.table_rows(config)))}|dim {config.embedding_dim}|"
                f"h {config.ids_per_feature}|dense {config.dense_features}")

    def record(self, config) -> Dict:
        rows = self.table_rows(config)
        return {"tables": len(rows), "rows": list(rows), "embedding_dim": config.embedding_dim,
                "ids_per_feature": config.ids_per_feature, "zipf_alpha": config.zipf_alpha,
                "dense_features": config.dense_features, "table_bytes": self.table_bytes(config),
                "dense_params": self.dense_params(config), "bottom_mlp": list(self.bottom), "top_mlp": list(self.top),
                **({"preset": "Criteo Kaggle (facebookresearch/dlrm)", "embedding_scale": config.embedding_scale}
                   if self.criteo else {})}

    def table_ids(self, features) -> list:
        return [features["sparse"][:, t, :] for t in range(features["sparse"].shape[1])]

    def touched_rows(self, config) -> list:
        import numpy as np

        _, ids, _ = shard_arrays(self.table_rows(config), config.dense_features, config.ids_per_feature,
                                 config.zipf_alpha, config.batch_size, shards(config), config.seed)
        return [[np.unique(ids[s, :, t, :]) for t in range(ids.shape[2])] for s in range(ids.shape[0])]

    def step_facts(self, config) -> Dict:
        """Rows each shard's batch touches per table (each counted once: the model looks up unique
        ids) and the union over all shards, which is what a synchronous global step updates."""
        import numpy as np

        rows = self.table_rows(config)
        touched = self.touched_rows(config)
        per_shard = [[ids.size for ids in shard] for shard in touched]
        union = [int(np.unique(np.concatenate([shard[t] for shard in touched])).size) for t in range(len(rows))]
        return {"tables": len(rows), "rows": list(rows), "embedding_dim": config.embedding_dim,
                "lookups_per_step": config.batch_size * len(rows) * config.ids_per_feature,
                "unique_rows_per_shard": [sum(u) for u in per_shard], "unique_rows_all_shards": sum(union),
                "unique_rows_per_table": union, "row_bytes": 4 * config.embedding_dim,
                "definition": "rows of the embedding tables a step's ids touch, each once (the model looks up "
                              "unique ids): per data shard (a worker's batch) and over all shards (a global step)"}

    def build(self, config):
        from tfbench.models.dlrm import dlrm

        return dlrm(self.table_rows(config), config.embedding_dim, config.dense_features, config.ids_per_feature,
                    self.bottom, self.top)

    def batch(self, config, batch_size: int, shard=0) -> Tuple:
        """The shard's batch: every shard's ids are made with numpy before timing and indexed by
        `shard`, which may be a tensor (a parameter-server worker learns its index on the worker)."""
        from tfbench.framework.tf_import import tf

        dense, ids, labels = shard_arrays(self.table_rows(config), config.dense_features,
                                          config.ids_per_feature, config.zipf_alpha, batch_size, shards(config),
                                          config.seed)
        pick = (lambda a: tf.gather(tf.constant(a), shard))
        return {"dense": pick(dense), "sparse": pick(ids)}, pick(labels)

    def example_spec(self, config) -> Tuple:
        from tfbench.framework.tf_import import tf

        tables = len(self.table_rows(config))
        return ({"dense": tf.TensorSpec((1, config.dense_features), tf.float32),
                 "sparse": tf.TensorSpec((1, tables, config.ids_per_feature), tf.int64)},
                tf.TensorSpec((1,), tf.float32))

    def per_example_loss(self, labels, outputs):
        from tfbench.framework.tf_import import tf

        logits = tf.reshape(tf.cast(outputs, tf.float32), [-1])
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(labels, tf.float32), logits=logits)

    def memory_bound(self, config) -> Optional[Dict[str, int]]:
        tables = len(self.table_rows(config))
        d, h = config.embedding_dim, config.ids_per_feature
        # floats one example leaves for the backward pass: MLP outputs (pre- and post-activation),
        # the looked-up rows and their sums, the interaction; twice that as a margin
        mlp = 2 * (sum(self.bottom) + d + sum(self.top) + 1)
        interaction = (tables + 1) * d * 2 + (tables + 1) ** 2 + (tables + 1) * tables // 2 + d
        floats = 2 * (mlp + tables * (h + 1) * d + interaction + config.dense_features)
        return {"params": sum(self.table_rows(config)) * d + self.dense_params(config),
                "activation_floats": floats, "largest_floats": floats}

    def memory_figures(self, config) -> Optional[Dict[str, int]]:
        return self.memory_bound(config)  # its parameters are exact; a table of 2e9 rows is never built to count it

    def replicated_bytes(self, config) -> int:
        return self.table_bytes(config)


def shards(config) -> int:
    """Shards whose batches differ: replicas of the whole cluster (a Mirrored task's devices)."""
    return max(1, config.num_workers, config.effective_num_local_devices)


@functools.lru_cache(maxsize=8)
def zipf_cdf(rows: int, alpha: float):
    """The cumulative distribution of Zipf(alpha) over rows 0..rows-1 (p_i ∝ (i + 1)^-alpha)."""
    import numpy as np

    weights = np.arange(1, rows + 1, dtype=np.float64) ** -alpha
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def zipf_ids(rows: int, alpha: float, count: int, rng):
    """`count` ids of one table, drawn by inverse transform from the Zipf CDF."""
    import numpy as np

    return np.minimum(np.searchsorted(zipf_cdf(rows, alpha), rng.random(count), side="right"), rows - 1)


@functools.lru_cache(maxsize=4)
def shard_arrays(table_rows: Sequence[int], dense_features: int, ids_per_feature: int, alpha: float,
                 batch_size: int, num_shards: int, seed: int):
    """(dense [S, B, F] float32, ids [S, B, T, h] int64, labels [S, B] float32) of every shard,
    each shard from its own generator seeded by (seed, shard)."""
    import numpy as np

    dense, ids, labels = [], [], []
    for shard in range(num_shards):
        rng = np.random.default_rng([seed, shard])
        dense.append(rng.random((batch_size, dense_features), dtype=np.float32))
        ids.append(np.stack([zipf_ids(rows, alpha, batch_size * ids_per_feature, rng).reshape(batch_size,
                                                                                               ids_per_feature)
                             for rows in table_rows], axis=1).astype(np.int64))
        labels.append((rng.random(batch_size) < CLICK_RATE).astype(np.float32))
    return np.stack(dense), np.stack(ids), np.stack(labels)


RECOMMENDERS: Dict[str, RecommenderWorkload] = {w.name: w for w in (
    RecommenderWorkload("dlrm", "DLRM-like recommender: T tables of R rows x D dims, Zipf ids, small MLPs",
                        own_flags=tuple(f for f in FLAGS if f != "embedding_scale")),
    RecommenderWorkload("dlrm_criteo", "DLRM on Criteo Kaggle's 26 tables (rows x --embedding_scale), reference MLPs",
                        bottom=(512, 256, 64), top=(512, 256), criteo=True,
                        own_flags=tuple(f for f in FLAGS if f not in ("embedding_tables", "embedding_rows"))),
)}
KIND = WorkloadKind("recommender", f"a recommender ({', '.join(RECOMMENDERS)}; embedding tables)", ARGUMENTS,
                    RECOMMENDERS)
