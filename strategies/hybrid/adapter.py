"""The hybrid strategy's adapter: a Horovod rank (strategies.horovod) whose embedding tables live on
the ps tasks (strategies.hybrid.tables) and whose other variables stay on the rank, their
gradients summed by Horovod's all-reduce.

Horovod's all-reduce, not TensorFlow's collectives: each rank joins the ps' cluster under a job of
its own (one job shared by several clients hangs them), so the ranks are not tasks of one
TensorFlow cluster that collectives could group; and Horovod's ring over Gloo is the one
tfbench's horovod strategy runs, so the dense part of the two compares like with like.
"""
from __future__ import annotations

import time
from typing import Callable, List

from strategies.base import SyncAdapter, peek
from strategies.horovod import HorovodAdapter
from strategies.hybrid import records, tables as tables_lib
from strategies.hybrid.step import HybridMarks, make
from tfbench.framework import precision
from tfbench.loop import steps
from tfbench.measure import startup
from tfbench.models.tables import dense_variables, embedding_tables


class HybridAdapter(HorovodAdapter):
    tables = None  # build_model: the PsTables creator that holds the model's tables

    def make_strategy(self):
        from tfbench.framework.tf_import import tf

        strategy = super().make_strategy()  # hvd.init()
        cluster = tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().as_dict()
        self.num_ps = len(cluster.get("ps", []))
        rank = self.hvd.rank()
        job = tables_lib.connect(cluster, rank, self.hvd.size(), self.barrier)
        self.device = job + self.device  # the rank's own device in the cluster it joined
        return strategy

    update_applied_by = ("the optimizer's apply_gradients on each rank for the dense variables; each rank's "
                         "ResourceScatterAdd of -learning rate x its rows' gradients on the ps for the tables")

    def barrier(self, name: str) -> None:
        """Every rank gets here before any goes on (a Horovod all-reduce of one value)."""
        from tfbench.framework.tf_import import tf

        self.hvd.allreduce(tf.constant(0.0), name=name).numpy()

    def build_model(self) -> None:
        """The workload's model with its tables on the ps (rank 0 writes their initial values),
        and the optimizer of the dense variables only: the ps hold no optimizer state."""
        from tfbench.framework.tf_import import keras, tf

        keras.utils.set_random_seed(self.config.seed)
        precision.apply_policy(self.config.precision)
        run_tag = self.run_dir.run_id if self.run_dir else "run"
        self.tables = tables_lib.PsTables(self.num_ps, self.config.hybrid_shard_rule, run_tag,
                                          initialise=self.hvd.rank() == 0)
        with self.scope(), tf.variable_creator_scope(self.tables):
            self.model = self.config.workload.build(self.config)
        self.tables.stack()
        self.dense = dense_variables(self.model)
        self.table_layers = [layer for layer in self.model.submodules if isinstance(layer, keras.layers.Embedding)]
        self.tables.serve(self.table_layers)
        with self.scope():
            self.optimizer = steps.optimizer(self.config)  # an SGD (--optimizer): the rows' step is the same
            if self.config.mode == "train":
                steps.prepare(self.optimizer, self.dense)
        startup.mark("model_built")

    def after_build(self) -> None:
        """Rank 0's dense weights to every rank; the tables' initial values, which rank 0 wrote on
        the ps, are there for every rank once this barrier is passed (rank 0 reads a row of every
        stack first: its writes to a ps were queued there, not done)."""
        variables = list(self.dense) + (list(self.optimizer.variables()) if self.config.mode == "train" else [])
        self.hvd.broadcast_variables(variables, root_rank=0)
        if self.tables.initialise:  # remote ops run asynchronously: a read of every stack waits for its write
            for stack in self.tables.stacks:
                stack.variable.sparse_read([0]).numpy()
        self.barrier("tables_initialised")

    def weights(self):
        """The trainable variables in the order of the model built without the ps (a table whole,
        in row order, where its first range stands), as the other strategies' weights."""
        parts = {id(p): t for t, table in enumerate(self.tables.tables) for p in [table, *table.variables]}
        out, seen = [], set()
        for v in self.model.trainable_variables:
            t = parts.get(id(v))
            if t is None:
                out.append(v.numpy())
            elif t not in seen:
                seen.add(t)
                out.append(self.tables.whole(t))
        return out

    def make_step(self) -> Callable[[], object]:
        step = make(self, self.tables, self.dense, self.table_layers)
        sample, batches = peek(self._rank_batches())  # a stream's first batch is step 0's
        self.step_function = lambda: step.get_concrete_function(sample)
        self.kept: List[HybridMarks] = []

        def run() -> HybridMarks:
            batch = batches()
            in_hand = time.time()
            value, marks, done = step(batch)
            value.numpy()
            done.numpy()
            kept = HybridMarks(in_hand, float(marks[2].numpy()), tuple(marks.numpy().tolist()), time.time())
            self.kept.append(kept)
            return kept

        return run

    def run(self, reporter=None, profiler=None):
        measurements = SyncAdapter.run(self, reporter, profiler)
        measured = self.kept[len(self.kept) - len(measurements[0].timings):]
        own = records.fields(self, measured)
        measurements[0].parts = (*measurements[0].parts, *own)
        return measurements

    def summary_parts(self) -> list:
        return []

    def data_shards(self) -> List[int]:
        return list(range(self.hvd.size()))

    def row_holders(self) -> list:
        return [*super().row_holders(), *(stack.variable for stack in self.tables.stacks)]

    def table_variables(self) -> list:
        return embedding_tables(self.model)
