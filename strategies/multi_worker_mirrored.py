"""MultiWorkerMirroredStrategy: synchronous all-reduce across worker tasks (worker 0 is chief).

--all_reduce picks the collective implementation (CommunicationOptions): auto, ring, nccl.
"""
import contextlib

from strategies.base import SyncAdapter


class MultiWorkerMirroredAdapter(SyncAdapter):
    def make_strategy(self):
        from tfbench.framework.tf_import import tf

        implementation = {
            "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
            "ring": tf.distribute.experimental.CommunicationImplementation.RING,
            "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
        }[self.config.all_reduce]
        return tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver(),
            communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation))

    @property
    def local_replicas(self) -> int:
        return self.replicas // max(1, len(self.plan.workers))

    def device_scope(self):
        return contextlib.nullcontext()  # the strategy places replicas on this worker's devices

    def summary(self):
        out = super().summary()
        out["all_reduce"] = self.config.all_reduce
        return out
