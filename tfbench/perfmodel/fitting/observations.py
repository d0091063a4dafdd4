"""What one tfbench run says to the model: its setting and what it measured, from its config and
cluster record (plain dicts), so that fitting and validation never read files or TensorFlow.

A run is usable when it finished ok, trained, and its record splits the global step
(tfbench.measure.breakdown); the strategies the model predicts are the parameter server and the
ring all-reduces; single-task runs (default, mirrored) still give compute per image.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, Optional, Tuple

from tfbench.perfmodel import protocols
from tfbench.perfmodel.fitting import params as params_lib

PREDICTED = protocols.PREDICTED
MEASURED_COMPUTE = ("in-step timestamps of every rank", "the task's own steps")


@dataclasses.dataclass(frozen=True)
class Observation:
    run_id: str
    strategy: str
    num_workers: int
    num_ps: int
    ps_placement: str
    ps_sync: bool
    batch_size: int
    model: str
    mode: str
    precision: str
    image_size: int
    num_classes: int
    cores: int  # cores per worker, as the record states them
    link: str  # --link_bandwidth, or "unshaped"
    link_rate_bps: float  # configured; inf for an unshaped or local network
    alpha_s: Optional[float]  # the link probe's Hockney alpha and beta (bits/s), when measured
    beta_bps: Optional[float]
    w_bytes: float
    step_s: float  # the cluster's mean global step
    images_per_sec: float
    compute_s: float  # the step split's means, per global step
    communication_s: float
    apply_s: float
    compute_measured: bool  # compute timed in the step (sync ranks, one task), not derived (ps)
    bytes_per_step: Dict[str, float]  # most tx bytes per global step on a ps host / a worker host
    core_share_mean: float = 1.0  # workers on a worker's cores (itself included), mean over workers
    core_share_max: float = 1.0  # ... for the most crowded worker
    shard_bytes: Tuple[float, ...] = ()  # parameter server: trainable bytes per ps as the run placed them
    shard_variables: Tuple[int, ...] = ()  # ... and variables (parts) per ps; () = |w|/k each
    ps_host_tx: Tuple[float, ...] = ()  # parameter server: tx bytes per global step of each ps-holding host
    step_rel_se: float = 0.0  # standard error of the mean step over the mean step (the run's own scatter)
    compute: str = "real"  # --compute: real, or emulated (a wait that uses no CPU: shared cores do not slow it)

    @property
    def key(self) -> str:
        return params_lib.strategy_key(self.strategy, self.ps_sync)

    @property
    def compute_key(self) -> Tuple:
        return (self.model, self.mode, self.precision, self.image_size, self.num_classes, self.batch_size,
                self.cores)

    @property
    def predicted(self) -> bool:
        return self.strategy in PREDICTED

    def scaled(self, factor: float) -> "Observation":
        """The same run had every measured time been `factor` times as long (its rate 1/factor)."""
        return dataclasses.replace(self, step_s=self.step_s * factor, images_per_sec=self.images_per_sec / factor,
                                   compute_s=self.compute_s * factor, communication_s=self.communication_s * factor,
                                   apply_s=self.apply_s * factor)


def from_run(run_id: str, config: dict, cluster: dict, w_bytes: float) -> Tuple[Optional[Observation], str]:
    """(the observation, '') or (None, why the run cannot be used)."""
    if cluster.get("status") != "ok":
        return None, "the run failed"
    if config.get("mode") != "train":
        return None, "a forward-only run (the model predicts training)"
    split = cluster.get("step_breakdown") or {}
    if "mean_s" not in split:
        return None, f"no step split ({split.get('note', 'an older record')})"
    cores = cluster.get("cores_per_worker")
    if not cores or float(cores) != int(cores):
        return None, "its workers had different or fractional cores"
    link = cluster.get("link") or {}
    strategy = config["strategy"]
    n = int(config.get("num_workers", 1)) if strategy not in protocols.ONE_TASK else 1
    mean = split["mean_s"]
    return Observation(
        run_id=run_id, strategy=strategy, num_workers=n, num_ps=int(cluster.get("num_ps") or 0),
        ps_placement=config.get("ps_placement", "collocated"), ps_sync=bool(config.get("ps_sync")),
        batch_size=int(config["batch_size"]), model=config["model"], mode=config["mode"],
        precision=config.get("precision", "fp32"), image_size=int(config["image_size"]),
        num_classes=int(config["num_classes"]), cores=int(cores),
        link=(config.get("link_bandwidth") or "unshaped").lower() if config.get("network") == "emulated" else "local",
        link_rate_bps=float(link.get("configured_bps") or float("inf")),
        alpha_s=link["alpha_ms"] / 1e3 if link.get("alpha_ms") is not None else None,
        beta_bps=float(link["beta_bps"]) if link.get("beta_bps") else None,
        w_bytes=float(w_bytes), step_s=float(split["step_mean_s"]),
        images_per_sec=float(cluster["images_per_sec"]), compute_s=float(mean.get("compute", 0.0)),
        communication_s=float(mean.get("communication", 0.0)), apply_s=float(mean.get("apply", 0.0)),
        compute_measured=split.get("source") in MEASURED_COMPUTE, bytes_per_step=_bytes(cluster, config),
        ps_host_tx=_ps_host_tx(cluster, config), step_rel_se=_rel_se(cluster.get("stats") or {}),
        compute=config.get("compute") or "real",
        **(_core_share(cluster, n) if config.get("compute") != "emulated" else {})), ""


def _rel_se(stats: dict) -> float:
    """The relative standard error of the run's mean global step (0 when its record lacks it)."""
    count, mean, std = stats.get("count") or 0, stats.get("mean_s") or 0.0, stats.get("std_s") or 0.0
    return std / math.sqrt(count) / mean if count > 1 and mean > 0 else 0.0


def _core_share(cluster: dict, n: int) -> Dict[str, float]:
    """How many workers compute on each worker's cores (the record's shared_cores): a worker
    sharing its core with another computes about half as fast. Parameter servers and the
    coordinator are left out: they wait on the network far more than they compute."""
    shared = cluster.get("shared_cores") or {}
    shares = [1 + sum(1 for other in shared.get(f"worker_{i}", []) if other.startswith("worker_"))
              for i in range(max(1, n))]
    return {"core_share_mean": sum(shares) / len(shares), "core_share_max": float(max(shares))}


def _hosts(cluster: dict) -> list:
    traffic = cluster.get("link_traffic") or {}
    return sorted(traffic, key=lambda h: int(h[1:]) if h[1:].isdigit() else 0)


def _tx(cluster: dict) -> Dict[str, float]:
    traffic = cluster.get("link_traffic") or {}
    return {h: float(traffic[h].get("tx_bytes_per_step") or 0.0) for h in _hosts(cluster)}


def _ps_hosts(cluster: dict, config: dict) -> list:
    """The hosts holding a ps, in the order of the plan: after the workers' when separate (one
    each); when collocated ps j on worker j's host (j mod N), so the first min(k, N) hosts."""
    if config.get("strategy") != protocols.PS:
        return []
    hosts = _hosts(cluster)
    n, k = int(config.get("num_workers", 1)), int(cluster.get("num_ps") or 0)
    return hosts[n:n + k] if config.get("ps_placement") == "separate" else hosts[:min(k, n)]


def _ps_host_tx(cluster: dict, config: dict) -> Tuple[float, ...]:
    """Tx bytes per global step of each ps-holding host, in ps order."""
    tx = _tx(cluster)
    return tuple(tx[h] for h in _ps_hosts(cluster, config))


def _bytes(cluster: dict, config: dict) -> Dict[str, float]:
    """The most bytes per global step any ps host and any worker host sent on its link
    (emulated runs record each host's link)."""
    hosts = _hosts(cluster)
    if not hosts:
        return {}
    ps_hosts = _ps_hosts(cluster, config)
    tx = _tx(cluster)
    out = {"worker": max(tx[h] for h in (set(hosts) - set(ps_hosts) or hosts))}
    if ps_hosts:
        out["ps"] = max(tx[h] for h in ps_hosts)
    return out
