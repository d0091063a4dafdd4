"""The hybrid's ps tasks: gRPC servers holding the tables' row ranges, which the ranks read and
update themselves; they run nothing of their own."""
from __future__ import annotations


def serve(task, intra_threads: int, inter_threads: int, on_ready) -> None:
    """A ps task: a tf.distribute.Server that knows the ps job only; returns never.

    Each rank brings its own view of the cluster (the ps and a job of its own) when it connects
    (strategies.hybrid.tables.connect), so the server needs no worker addresses."""
    from tfbench.framework.tf_import import tf

    ps = tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().as_dict()["ps"]
    session_config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra_threads,
                                              inter_op_parallelism_threads=inter_threads)
    server = tf.distribute.Server(tf.train.ClusterSpec({"ps": ps}), job_name="ps", task_index=task.index,
                                  protocol="grpc", config=session_config, start=True)
    on_ready()
    server.join()
