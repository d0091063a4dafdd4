"""The parameter-server strategy's ps and worker tasks: gRPC servers that the coordinator drives
(tf.distribute.Server from the task's TF_CONFIG), which run no Python loop of their own."""
from __future__ import annotations

from strategies import placement


def serve(task, intra_threads: int, inter_threads: int, on_ready) -> None:
    """A ps or worker task: a gRPC server that the coordinator drives; returns never."""
    from tfbench.framework.tf_import import tf

    placement.line_buffered_c_stdout()  # its placer's lines are the coordinator's evidence
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    session_config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra_threads,
                                              inter_op_parallelism_threads=inter_threads)
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=task.role, task_index=task.index,
                                  protocol="grpc", config=session_config, start=True)
    on_ready()
    server.join()
