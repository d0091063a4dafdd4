"""MultiWorkerMirroredStrategy: synchronous all-reduce across worker tasks (worker 0 is chief).

Its knobs (tfbench.config.knobs) are TensorFlow's CommunicationOptions: --all_reduce picks the
collective implementation (auto, ring, nccl), --mwms_bytes_per_pack packs gradients into
all-reduces of at least that many bytes (0, TensorFlow's default: one pack for the whole step),
--mwms_timeout bounds each collective.
"""
import contextlib

from strategies.base import SyncAdapter
from tfbench.config import knobs
from tfbench.measure import comm


def communication_options(config):
    """The tf.distribute.experimental.CommunicationOptions the knobs ask for."""
    from tfbench.framework.tf_import import tf

    implementation = {
        "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
        "ring": tf.distribute.experimental.CommunicationImplementation.RING,
        "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
    }[config.all_reduce]
    return tf.distribute.experimental.CommunicationOptions(
        bytes_per_pack=config.mwms_bytes_per_pack, timeout_seconds=config.mwms_timeout or None,
        implementation=implementation)


class MultiWorkerMirroredAdapter(SyncAdapter):
    def make_strategy(self):
        from tfbench.framework.tf_import import tf

        return tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver(),
            communication_options=communication_options(self.config))

    @property
    def local_replicas(self) -> int:
        return self.replicas // max(1, len(self.plan.workers))

    def device_scope(self):
        return contextlib.nullcontext()  # the strategy places replicas on this worker's devices

    def summary(self):
        out = super().summary()
        out.update(knobs.knobs_of(self.config))
        out["communication_options"] = live_options(self.strategy)
        if self.config.mode == "train":
            out["comm_plan"] = comm.plan_all_reduce(gradient_bytes(self.model), self.config.mwms_bytes_per_pack)
        return out


def live_options(strategy) -> dict:
    """The CommunicationOptions the live strategy's collectives were built with (what the
    knobs reached, read back from the strategy rather than from the flags)."""
    options = strategy.extended._communication_options  # noqa: SLF001 - TF keeps no public getter
    return {"bytes_per_pack": options.bytes_per_pack, "timeout_seconds": options.timeout_seconds,
            "implementation": options.implementation.value}


def gradient_bytes(model) -> list:
    """Bytes of each trainable variable's gradient, in variable order (what an all-reduce moves)."""
    return [int(v.shape.num_elements()) * v.dtype.size for v in model.trainable_variables]
