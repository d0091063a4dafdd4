"""Run-level TensorBoard HParams, so runs with different settings compare in one dashboard.

Each run writes one HParams session into its tb/ directory: the settings that distinguish
runs, the final cluster metrics as scalars next to them, and an end status. No experiment
definition is written: the dashboard infers one from all sessions under a logdir, which keeps
runs with different settings from overriding each other's definition. TensorBoard's summary_v2
protos are used directly, so the launcher writes this without importing TensorFlow.
"""
from __future__ import annotations

import math
import time
from typing import Dict, Optional

from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2, summary_v2

from tfbench.config import RunConfig, knobs
from tfbench.results.rundir import RunDir
from tfbench.tensorboard.events import EventWriter

EXAMPLES_PER_SEC = "hparams/cluster_examples_per_sec"
UNIT_PER_SEC = "hparams/cluster_{unit}_per_sec"  # images/sec, tokens/sec: the workload's own unit
# The mean of the cluster's global step (records.cluster_steps: one sample per global step; async
# PS: a round of N updates), the same figure as the run table's cluster row.
STEP_TIME_MS = "hparams/mean_step_time_ms"


def hparams_of(config: RunConfig) -> Dict[str, object]:
    return {
        "strategy": config.strategy,
        "num_workers": config.num_workers,
        "num_ps": config.effective_num_ps,
        "batch_size": config.batch_size,
        "placement": config.placement,
        "device": config.device,
        "mode": config.mode,
        "model": config.model,
        "image_size": config.image_size,
        "ps_sync": config.ps_sync,
        "precision": config.precision,
        "xla": config.xla,
        "cores_per_worker": config.cores_per_worker,
        **knobs.knobs_of(config),  # the strategy's own settings (tfbench.config.knobs)
    }


def succeeded(cluster_record: Optional[dict]) -> bool:
    return cluster_record is not None and cluster_record.get("status") != "failed"


def metrics_of(cluster_record: Optional[dict]) -> Dict[str, float]:
    """The final metrics of a run that succeeded; NaN or missing values are left out."""
    if not succeeded(cluster_record):
        return {}
    mean_s = (cluster_record.get("stats") or {}).get("mean_s")
    unit = cluster_record.get("unit", "images")
    values = {
        EXAMPLES_PER_SEC: cluster_record.get("examples_per_sec"),
        UNIT_PER_SEC.format(unit=unit): cluster_record.get(f"{unit}_per_sec"),
        STEP_TIME_MS: mean_s * 1000 if isinstance(mean_s, (int, float)) else None,
    }
    return {tag: float(v) for tag, v in values.items()
            if isinstance(v, (int, float)) and math.isfinite(v)}


def _session_end(status: int, end_time: float) -> summary_pb2.Summary:
    data = plugin_data_pb2.HParamsPluginData(
        session_end_info=plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=end_time))
    summary = summary_pb2.Summary()
    summary.value.add(tag=metadata.SESSION_END_INFO_TAG, tensor=metadata.NULL_TENSOR,
                      metadata=metadata.create_summary_metadata(data))
    return summary


def write_hparams(run: RunDir, config: RunConfig, cluster_record: Optional[dict]) -> str:
    """Writes the run's HParams session into run.tb_dir; returns the event file's path."""
    now = time.time()
    record = cluster_record or {}
    start = float(record.get("window_start") or now)
    end = float(record.get("window_end") or now)
    status = api_pb2.STATUS_SUCCESS if succeeded(cluster_record) else api_pb2.STATUS_FAILURE
    with EventWriter(run.tb_dir, suffix=".hparams") as writer:
        writer.summary(summary_v2.hparams_pb(hparams_of(config), trial_id=run.run_id,
                                             start_time_secs=start), step=0, wall_time=start)
        for tag, value in metrics_of(cluster_record).items():
            writer.scalar(tag, value, step=0, wall_time=end)
        writer.summary(_session_end(status, end), step=0, wall_time=end)
        return writer.path
