"""MultiWorkerMirroredStrategy: synchronous all-reduce across worker tasks (worker 0 is chief).

Its knobs (tfbench.config.knobs) are TensorFlow's CommunicationOptions: --all_reduce picks the
collective implementation (auto, ring, nccl), --mwms_bytes_per_pack packs gradients into
all-reduces of at least that many bytes (0, TensorFlow's default: one pack for the whole step),
--mwms_timeout bounds each collective.
"""
import contextlib
import dataclasses
import time
from typing import Dict, Optional

from strategies.base import SyncAdapter
from strategies.measurement import absent, flat
from tfbench.config import knobs
from tfbench.measure import comm
from tfbench.models.tables import dense_variables


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


@dataclasses.dataclass
class AllReduceFields:
    """Its records' own part: the knobs, what the live strategy's collectives were built with,
    and (training) the all-reduce's communication plan (tfbench.measure.comm)."""

    knobs: Dict = flat()
    communication_options: Dict = dataclasses.field(default_factory=dict)
    comm_plan: Optional[Dict] = absent()


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

    def before_exit(self) -> None:
        """The workers leave together. A worker that ended its last step may still be fetching a
        peer's last chunk of the all-reduce (collectives pull their inputs), and worker 0 hosts the
        coordination service every worker heartbeats to: one that exits while another is still at
        work aborts that one's collectives ("Collective ops is aborted by: Socket closed"). So each
        waits, its records written, at the coordination service's barrier until all are there, and
        the task hosting the service leaves last (leave_together)."""
        leave_together(self.strategy, self.task.name)

    def summary_parts(self) -> list:
        train = self.config.mode == "train"
        return [AllReduceFields(knobs.knobs_of(self.config), live_options(self.strategy),
                                comm.plan_all_reduce(gradient_bytes(self.model), self.config.mwms_bytes_per_pack)
                                if train else None)]


EXIT_BARRIER = "tfbench_records_written"
LEFT_KEY = "tfbench_left/{job}/{index}"  # a worker that passed the barrier and needs the service no more
EXIT_TIMEOUT_MS = 600_000  # a peer still writing its records; a dead peer fails the barrier sooner


def leave_together(strategy, task_name: str) -> None:
    """Waits at the coordination service's barrier (TensorFlow configures the service for MWMS
    clusters of more than one task), then leaves in order: the task hosting the service last, once
    every other has said (a key in the service's store) that it passed the barrier, so that no
    barrier's answer is lost with the service (the key's own answer may be, when that task has
    nothing left to do). Says in the task's log when it left; a failed or
    timed-out wait ends it: this task's records are written, and the peer's own exit says what went
    wrong with it."""
    from tfbench.framework.tf_import import eager_context  # the barrier and the store: no public API

    context, extended = eager_context.context(), strategy.extended
    if extended._num_workers <= 1 or context.coordination_service is None:  # noqa: SLF001
        return
    spec = extended._cluster_spec  # noqa: SLF001
    me = (extended._task_type, extended._task_id)  # noqa: SLF001
    leader = (context.coordination_service.service_leader.split("/job:")[-1].split("/")[0],
              int(context.coordination_service.service_leader.rsplit("task:", 1)[-1]))
    try:
        context.wait_at_barrier(EXIT_BARRIER, EXIT_TIMEOUT_MS)
        if me != leader:
            context.set_config_key_value(LEFT_KEY.format(job=me[0], index=me[1]), "1")
        else:
            for job in spec.jobs:
                for index in range(spec.num_tasks(job)):
                    if (job, index) != me:
                        context.get_config_key_value(LEFT_KEY.format(job=job, index=index), EXIT_TIMEOUT_MS)
        print(f"tfbench: {task_name} leaves with every worker's records written, at {time.time():.3f}", flush=True)
    except Exception as e:  # noqa: BLE001 - leaving is all that is left to do
        print(f"tfbench: {task_name}'s wait for the other workers ended early: "
              f"{str(e).splitlines()[0] if str(e) else e!r}", flush=True)


def live_options(strategy) -> dict:
    """The CommunicationOptions the live strategy's collectives were built with (what the
    knobs reached, read back from the strategy rather than from the flags)."""
    options = strategy.extended._communication_options  # noqa: SLF001 - TF keeps no public getter
    return {"bytes_per_pack": options.bytes_per_pack, "timeout_seconds": options.timeout_seconds,
            "implementation": options.implementation.value}


def gradient_bytes(model, dense_tables: bool = False) -> list:
    """Bytes of each dense gradient, in variable order (what an all-reduce moves); an embedding
    table's gradient is its touched rows, all-gathered apart (tfbench.measure.sparse), unless
    `dense_tables` (Horovod's sparse_as_dense) all-reduces it whole."""
    variables = model.trainable_variables if dense_tables else dense_variables(model)
    return [int(v.shape.num_elements()) * v.dtype.size for v in variables]
