"""Recommender workloads: a DLRM-like model (tfbench.models.dlrm) on dense features and categorical
ids, counted in examples (one example: one user-item request with its click label).

What a step consumes: --dense_features floats and, for each of the T embedding tables, h ids
(--ids_per_feature, multi-hot): values drawn from a Zipf law of exponent α (--zipf_alpha) over the
table's values, as in click logs where a few values take most lookups (α = 0: uniform), each value
in the row a fixed hash of it gives (--id_layout=hashed) or, to show the pile-up on a table's first
shard, row = value (hot_first); labels from a fixed planted click model, so that a held-out AUC
measures what training learnt (tfbench.workloads.clicks). The examples are a stream each task
makes from (seed, data shard, step) with TensorFlow ops in its input pipeline: every strategy sees
the same examples at the same step, and no table-sized array exists anywhere but the tables. The
loss is binary cross-entropy of one logit per example.

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

from tfbench.workloads import clicks
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
    Arg("float", "zipf_alpha", 1.0, "Categorical values drawn from a Zipf law of this exponent over a table's values "
                                     "(0: uniform)."),
    Arg("integer", "dense_features", 13, "Dense input features of the bottom MLP."),
    Arg("float", "embedding_scale", 0.25, "dlrm_criteo: every Criteo Kaggle table's rows times this (1: 33.8 M rows, "
                                          "2.2 GB at dimension 16)."),
    Arg("string", "id_layout", "hashed", "Each value's row: hashed (a fixed pseudo-random permutation of the table's "
                                         "rows, as hashing categorical values does: hot values on every shard) or "
                                         "hot_first (row = value: the hottest rows first, all on a table's first "
                                         "shard)."),
    Arg("float", "target_auc", 0.0, "Record the training time and examples to this held-out AUC (0: none); with "
                                    "--eval_every, or alone (10 evaluations a run), the held-out AUC is measured."),
))
# What recommenders read: their own arguments, and the image models' --eval_every (held-out AUC every this many steps).
FLAGS = ARGUMENTS.names + ("eval_every",)
MAX_TABLES = 1024
FACT_STEPS = 4  # steps whose ids a run's `sparse` facts and the rows each ps serves are counted over


@dataclasses.dataclass(frozen=True)
class RecommenderWorkload(Workload):
    unit: str = "examples"
    inputs: str = "dense features and categorical ids"
    kind: str = "recommender"
    bottom: Tuple[int, ...] = (64, 32)
    top: Tuple[int, ...] = (64, 32)
    criteo: bool = False  # the tables are Criteo's, scaled by --embedding_scale
    own_flags: Tuple[str, ...] = FLAGS
    streams: bool = True
    metric: str = "auc"
    labelled: bool = True
    fact_steps = FACT_STEPS

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
        need(config.id_layout in clicks.ID_LAYOUTS,
             f"--id_layout={config.id_layout!r} is unknown; choose {' or '.join(clicks.ID_LAYOUTS)}")
        need(0.0 <= config.target_auc <= 1.0, f"--target_auc is a held-out AUC in (0, 1] (0: none), "
                                              f"got {config.target_auc:g}")

    def evaluates(self, config) -> bool:
        """Held-out AUC is measured when asked (--eval_every or --target_auc): it pauses training."""
        return config.eval_every > 0 or config.target_auc > 0

    def target(self, config) -> float:
        return config.target_auc

    def default_num_ps(self, num_workers: int) -> int:
        """One ps per worker and at least two: every table sharded, each host serving its share of the rows."""
        return max(2, num_workers)

    def describe(self, config) -> str:
        rows = self.table_rows(config)
        tables = (f"{len(rows)} Criteo tables x {config.embedding_scale:g} ({sum(rows) / 1e6:.2f} M rows)"
                  if self.criteo else f"{len(rows)} tables x {rows[0]} rows")
        return (f"{tables} x {config.embedding_dim} dims ({self.table_bytes(config) / 1e6:.1f} MB), "
                f"{config.ids_per_feature} id(s)/feature, zipf {config.zipf_alpha:g} {config.id_layout}")

    def key(self, config) -> str:
        return (f"{self.name}|{','.join(map(str, self.table_rows(config)))}|dim {config.embedding_dim}|"
                f"h {config.ids_per_feature}|dense {config.dense_features}")

    def record(self, config) -> Dict:
        rows = self.table_rows(config)
        return {"tables": len(rows), "rows": list(rows), "embedding_dim": config.embedding_dim,
                "ids_per_feature": config.ids_per_feature, "zipf_alpha": config.zipf_alpha,
                "dense_features": config.dense_features, "table_bytes": self.table_bytes(config),
                "dense_params": self.dense_params(config), "bottom_mlp": list(self.bottom), "top_mlp": list(self.top),
                "id_layout": config.id_layout, "labels": clicks.DEFINITION,
                **({"preset": "Criteo Kaggle (facebookresearch/dlrm)", "embedding_scale": config.embedding_scale}
                   if self.criteo else {})}

    def table_ids(self, features) -> list:
        return [features["sparse"][:, t, :] for t in range(features["sparse"].shape[1])]

    def touched_rows(self, config, step: int = 0) -> list:
        """[shard][table] -> the distinct rows that shard's batch of `step` looks up in that table."""
        import numpy as np

        ids = self._ids_of_steps(config, max(FACT_STEPS, step + 1))[step]
        return [[np.unique(ids[s][:, t, :]) for t in range(ids.shape[2])] for s in range(ids.shape[0])]

    def _ids_of_steps(self, config, count: int):
        """ids [step][shard, B, T, h] of every shard's first `count` steps (TensorFlow, once per setting)."""
        return _stream_ids(self.table_rows(config), config.dense_features, config.ids_per_feature,
                           config.zipf_alpha, config.id_layout, config.batch_size, shards(config), config.seed, count)

    def step_facts(self, config) -> Dict:
        """Rows each shard's batch touches per table (each counted once: the model looks up unique
        ids) and the union over all shards, which is what a synchronous global step updates: the
        mean over the first FACT_STEPS steps."""
        import numpy as np

        rows = self.table_rows(config)
        steps = [self.touched_rows(config, k) for k in range(FACT_STEPS)]
        per_shard = np.mean([[sum(ids.size for ids in shard) for shard in touched] for touched in steps], axis=0)
        # an all-gather that pads: every worker's rows of a table as many as the most any worker touched
        padded = np.mean([sum(max(shard[t].size for shard in touched) for t in range(len(rows))) for touched in steps])
        union = np.mean([[np.unique(np.concatenate([shard[t] for shard in touched])).size for t in range(len(rows))]
                         for touched in steps], axis=0)
        return {"tables": len(rows), "rows": list(rows), "embedding_dim": config.embedding_dim,
                "lookups_per_step": config.batch_size * len(rows) * config.ids_per_feature,
                "unique_rows_per_shard": [round(float(u), 2) for u in per_shard],
                "unique_rows_all_shards": round(float(union.sum()), 2),
                "unique_rows_per_table": [round(float(u), 2) for u in union], "row_bytes": 4 * config.embedding_dim,
                "padded_rows_per_shard": round(float(padded), 2),
                "steps_counted": FACT_STEPS, "id_layout": config.id_layout,
                "definition": "rows of the embedding tables a step's ids touch, each once (the model looks up "
                              "unique ids): per data shard (a worker's batch) and over all shards (a global step), "
                              f"the mean over the first {FACT_STEPS} steps"}

    def build(self, config):
        from tfbench.models.dlrm import dlrm

        return dlrm(self.table_rows(config), config.embedding_dim, config.dense_features, config.ids_per_feature,
                    self.bottom, self.top, seed=config.seed)

    def batch(self, config, batch_size: int, shard=0, step=0) -> Tuple:
        """The batch of data shard `shard` at step `step` of the click stream (either may be a
        tensor: a parameter-server worker learns its index on the worker)."""
        return clicks.examples(self.table_rows(config), config.dense_features, config.ids_per_feature,
                               config.zipf_alpha, config.id_layout, batch_size, config.seed, shard, step)

    def dataset(self, config, shard, num_shards: int, batch_size: int, cores: int = 1):
        """The stream of reader `shard` of `num_shards`: step after step, the batches of the data
        shards it reads (shard, shard + num_shards, ...; a task's local replicas take turns at them)."""
        from tfbench.framework.tf_import import tf

        mine = tf.range(tf.cast(shard, tf.int64), shards(config), num_shards)
        count = tf.size(mine, out_type=tf.int64)
        return (tf.data.Dataset.range(2 ** 62)
                .map(lambda j: self.batch(config, batch_size, tf.gather(mine, j % count), j // count))
                .prefetch(2))

    def held_out(self, config) -> Tuple:
        """(features, labels) of the held-out stream, which no worker trains on."""
        return clicks.examples(self.table_rows(config), config.dense_features, config.ids_per_feature,
                               config.zipf_alpha, config.id_layout, clicks.HELD_OUT_EXAMPLES, config.seed,
                               clicks.HELD_OUT_SHARD, 0)

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

    def flops_config(self, config):
        """Tables of one row: a step's FLOPs are the rows its batch looks up, whatever the tables
        hold, and building a graph makes its tables (13 GB for dlrm_criteo at scale 1 and dim 96)."""
        return config.replace(embedding_rows=1, embedding_scale=1e-12)


def shards(config) -> int:
    """Shards whose batches differ: replicas of the whole cluster (a Mirrored task's devices)."""
    return max(1, config.num_workers, config.effective_num_local_devices)


@functools.lru_cache(maxsize=4)
def _stream_ids(table_rows: Sequence[int], dense_features: int, ids_per_feature: int, alpha: float, layout: str,
                batch_size: int, num_shards: int, seed: int, count: int):
    """numpy ids [step][shard, B, T, h] of the click stream's first `count` steps, every shard."""
    import numpy as np

    from tfbench.framework.tf_import import tf

    make = tf.function(lambda shard, step: clicks.examples(table_rows, dense_features, ids_per_feature, alpha, layout,
                                                           batch_size, seed, shard, step)[0]["sparse"])
    return [np.stack([make(tf.constant(s, tf.int64), tf.constant(k, tf.int64)).numpy() for s in range(num_shards)])
            for k in range(count)]


RECOMMENDERS: Dict[str, RecommenderWorkload] = {w.name: w for w in (
    RecommenderWorkload("dlrm", "DLRM-like recommender: T tables of R rows x D dims, Zipf ids, small MLPs",
                        own_flags=tuple(f for f in FLAGS if f != "embedding_scale")),
    RecommenderWorkload("dlrm_criteo", "DLRM on Criteo Kaggle's 26 tables (rows x --embedding_scale), reference MLPs",
                        bottom=(512, 256, 64), top=(512, 256), criteo=True,
                        own_flags=tuple(f for f in FLAGS if f not in ("embedding_tables", "embedding_rows"))),
)}
KIND = WorkloadKind("recommender", f"a recommender ({', '.join(RECOMMENDERS)}; embedding tables)", ARGUMENTS,
                    RECOMMENDERS)
