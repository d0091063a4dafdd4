"""Parameters of the model fitted on tfbench runs (observations), each naming its runs.

- compute per image, per (model, mode, precision, image size, classes, batch, cores): the median
  of the runs' compute part per worker step (tfbench.measure.breakdown) over the batch, divided
  by how many workers shared a worker's cores (a run's core share: 2 workers pinned to one core
  compute about half as fast); a compute timed inside the step (synchronous ranks, one task) is
  preferred to a parameter server's derived one, and a single worker's (no all-reduce to overlap
  with its backward pass) to that of a cluster;
- each link (by --link_bandwidth): the median alpha and beta its runs' link probes measured;
- the ps apply of synchronous parameter servers: the median apply part;
- several ps: the busiest shard as the run placed its variables (the observation's shard bytes),
  else |w|/k;
- per strategy, a fixed overhead per step and one more parameter its runs can fix, by
  scipy.optimize.least_squares on the runs' relative step-time errors, everything else held at
  the values above: for a synchronous parameter server the share chi of its link's two
  directions that does not overlap (tfbench.perfmodel.dense.terms.duplex_s: 0, other workers' pulls
  and pushes interleave; 1, they take turns), free once a run has two or more workers, with the
  link at the beta its probe measured; for the other strategies the share of the measured beta
  their protocol gets (gRPC, Gloo), free from three runs that vary the bytes on the wire. At one
  link rate the two are one slope in N, so each strategy fits one of them, not both. Otherwise
  chi stays DUPLEX_CHI, the share 1, and only the overhead is fitted;
- bytes per step: each run's busiest ps and worker link, measured against the equations.
"""
from __future__ import annotations

import dataclasses
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfbench.perfmodel.dense import equations as eq
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel.dense import prediction, sync_step, terms
from tfbench.perfmodel.fitting import spread as spread_lib
from tfbench.perfmodel.fitting.observations import Observation

MIN_RUNS_FOR_EFFICIENCY = 3
# chi where the runs cannot fix it (every run one worker): full duplex, as predict assumes by default
DUPLEX_CHI = 0.0
SYNC_PS = "parameter_server_sync"
LOWEST_EFFICIENCY = 0.05
SECOND_START = {"efficiency": 1.0, "chi": 0.5}
SECOND_LOWEST = {"efficiency": LOWEST_EFFICIENCY, "chi": 0.0}
SECOND_TABLE = {"efficiency": "link_efficiency", "chi": "duplex_chi"}


def _runs(group: Sequence[Observation]) -> List[str]:
    return sorted({o.run_id for o in group})


def compute_entries(observations: Sequence[Observation]) -> List[dict]:
    by_key: Dict[Tuple, List[Observation]] = {}
    for o in observations:
        by_key.setdefault(o.compute_key, []).append(o)
    entries = []
    for key, group in sorted(by_key.items(), key=lambda kv: str(kv[0])):
        timed = [o for o in group if o.compute_measured] or group
        timed = [o for o in timed if o.num_workers == 1] or timed
        values = [o.compute_s / o.batch_size / o.core_share_mean for o in timed if o.compute_s > 0]
        if not values:
            continue
        entry = dict(zip(params_lib.COMPUTE_KEY, key))
        entry.update(ms_per_image=1e3 * statistics.median(values), from_runs=_runs(timed))
        entries.append(entry)
    return entries


def link_entries(observations: Sequence[Observation]) -> Dict[str, dict]:
    by_link: Dict[str, List[Observation]] = {}
    for o in observations:
        if o.alpha_s is not None and o.beta_bps:
            by_link.setdefault(o.link, []).append(o)
    return {name: {"alpha_s": statistics.median(o.alpha_s for o in group),
                   "beta_bps": statistics.median(o.beta_bps for o in group), "from_runs": _runs(group)}
            for name, group in sorted(by_link.items())}


def ps_apply_entries(observations: Sequence[Observation]) -> Dict[str, dict]:
    sync = [o for o in observations if o.strategy == "parameter_server" and o.ps_sync]
    if not sync:
        return {}
    # the model charges a shard apply_s / k: per run, the apply of one whole |w|
    return {"parameter_server_sync": {"value_s": statistics.median(o.apply_s * max(1, o.num_ps) for o in sync),
                                      "from_runs": _runs(sync)}}


def setting(o: Observation, data: dict, overhead_s: Optional[float] = None,
            efficiency: Optional[float] = None, chi: Optional[float] = None) -> Optional[prediction.Setting]:
    """The model's setting of run `o` from the parameters (None: a parameter is missing)."""
    try:
        compute = params_lib.compute_entry(data, *o.compute_key)
    except params_lib.ParamsError:
        return None
    link = params_lib.link_entry(data, o.link)
    if link is None:
        return None
    if overhead_s is None:
        overhead_s = (params_lib.strategy_value(data, "overhead_s", o.key) or {}).get("value_s", 0.0)
    if efficiency is None:
        efficiency = (params_lib.strategy_value(data, "link_efficiency", o.key) or {}).get("value", 1.0)
    if chi is None:
        chi = (params_lib.strategy_value(data, "duplex_chi", o.key) or {}).get("value", DUPLEX_CHI)
    apply = (params_lib.strategy_value(data, "ps_apply_s", o.key) or {}).get("value_s", 0.0)
    # a synchronous step waits for the most crowded worker; asynchronous workers each go at their own pace
    share = o.core_share_mean if o.strategy == "parameter_server" and not o.ps_sync else o.core_share_max
    return prediction.Setting(
        strategy=o.strategy, w_bytes=o.w_bytes, compute_s=share * compute["ms_per_image"] * o.batch_size / 1e3,
        batch_size=o.batch_size, link=eq.Link(link["alpha_s"], link["beta_bps"] / 8).with_beta_share(efficiency),
        num_ps=max(1, o.num_ps), ps_placement=o.ps_placement if o.strategy == "parameter_server" else eq.SEPARATE,
        ps_sync=o.ps_sync, ps_apply_s=apply, overhead_s=overhead_s,
        extra=sync_step.Extra(shard_bytes=o.shard_bytes or None, shard_variables=o.shard_variables or None,
                              chi=chi))


def with_fitted(base: prediction.Setting, overhead_s: float, efficiency: float, chi: float) -> prediction.Setting:
    """A run's setting at share 1 and chi 0 (setting(o, data, 0.0, 1.0, DUPLEX_CHI)) with the
    fitted overhead, share of beta and chi, as setting() would make it."""
    return dataclasses.replace(base, overhead_s=overhead_s, link=base.link.with_beta_share(efficiency),
                               extra=dataclasses.replace(base.extra, chi=chi))


def predicted_rate(data: dict, o: Observation) -> Optional[float]:
    """Images/sec the parameters predict for run `o` (None: a parameter is missing)."""
    s = setting(o, data)
    return None if s is None else prediction.point(s, o.num_workers).images_per_sec


def free_parameter(key: str, group: Sequence[Observation], data: dict) -> Optional[str]:
    """Which parameter beside the overhead one strategy's runs can fix: 'chi' (a synchronous
    parameter server with a run of two or more workers), 'efficiency' (three or more runs of
    another strategy that vary the bytes on the wire) or None."""
    if key == SYNC_PS:
        return "chi" if any(o.num_workers >= 2 for o in group) else None
    wire = {(round(setting(o, data, 0.0, 1.0).link.beta), o.num_workers) for o in group}
    return "efficiency" if len(group) >= MIN_RUNS_FOR_EFFICIENCY and len(wire) >= 2 else None


def fitted_second(key: str, like: dict) -> Optional[str]:
    """Which second parameter the fit `like` fitted for a strategy key (None: none)."""
    return next((free for free, table in SECOND_TABLE.items() if key in like.get(table, {})), None)


def per_strategy(observations: Sequence[Observation], data: dict, like: Optional[dict] = None) -> Dict[str, dict]:
    """{"overhead_s": ..., "link_efficiency": ..., "duplex_chi": ...} tables per strategy key; with
    `like`, each strategy fits the second parameter that fit fitted (a refit keeps its shape)."""
    tables: Dict[str, dict] = {"overhead_s": {}, "link_efficiency": {}, "duplex_chi": {}}
    by_key: Dict[str, List[Observation]] = {}
    for o in observations:
        if o.predicted and setting(o, data, 0.0, 1.0, DUPLEX_CHI) is not None:
            by_key.setdefault(o.key, []).append(o)
    for key, group in sorted(by_key.items()):
        free = free_parameter(key, group, data) if like is None else fitted_second(key, like)

        bases = [setting(o, data, 0.0, 1.0, DUPLEX_CHI) for o in group]

        def residuals(x, group=group, free=free, bases=bases):
            second = {"efficiency": 1.0, "chi": DUPLEX_CHI}
            if free:
                second[free] = x[1]
            return [(prediction.point(with_fitted(s, x[0], **second), o.num_workers).step_s - o.step_s) / o.step_s
                    for o, s in zip(group, bases)]

        start, low, high = [0.0], [0.0], [np.inf]
        if free:  # the second parameter: a share, at most 1
            start.append(SECOND_START[free])
            low.append(SECOND_LOWEST[free])
            high.append(1.0)
        from scipy import optimize  # here: scipy takes a second to import, refusals need none

        result = optimize.least_squares(residuals, start, bounds=(low, high))
        runs = _runs(group)
        tables["overhead_s"][key] = {"value_s": float(result.x[0]), "from_runs": runs}
        if free:
            tables[SECOND_TABLE[free]][key] = {"value": float(result.x[1]), "from_runs": runs}
    return tables


def ps_host_loads(o: Observation) -> List[float]:
    """Bytes one way per global step on each ps-holding host's link, in the order of
    Observation.ps_host_tx: the shards as the run placed its variables (terms.host_loads; |w|/k
    each when the placement is unknown). A synchronous step moves one pull and one push per
    worker; an asynchronous global step is N updates, the same bytes."""
    sizes = o.shard_bytes or terms.even_shards(o.w_bytes, max(1, o.num_ps))
    loads, _ = terms.host_loads(o.num_workers, o.w_bytes, sizes, o.ps_placement)
    return [float(b) for b in loads]


def ps_host_checks(o: Observation) -> List[Tuple[int, float, float]]:
    """[(ps host index, predicted, measured bytes per global step leaving the host)] of a
    parameter-server run whose link counters were recorded (emulated hosts): each ps host's
    load (ps_host_loads) goes out and comes in, so its counter sees terms.wire_bytes(load, load).
    Hosts the shards leave idle are left out."""
    if o.strategy != "parameter_server" or not o.ps_host_tx:
        return []
    return [(i, terms.wire_bytes(p, p), m) for i, (p, m) in enumerate(zip(ps_host_loads(o), o.ps_host_tx)) if p > 0]


def bytes_checks(observations: Sequence[Observation]) -> List[dict]:
    """Each run's busiest ps and worker link per global step against the equations: the ps hosts
    by the shards' real bytes (ps_host_loads), a worker host |w| each way (ring: 2(N-1)/N |w|)."""
    checks = []
    for o in observations:
        if not o.bytes_per_step or not o.predicted:
            continue
        if o.strategy == "parameter_server":
            _, worker = eq.ps_link_bytes(o.num_workers, o.w_bytes, max(1, o.num_ps), o.ps_placement)
            predicted = {"ps": max(ps_host_loads(o), default=0.0), "worker": worker}
        else:
            predicted = {"worker": eq.ring_bytes_per_host(o.num_workers, o.w_bytes)}
        for host, measured in sorted(o.bytes_per_step.items()):
            if host in predicted:
                checks.append({"strategy": o.strategy, "num_workers": o.num_workers, "num_ps": o.num_ps,
                               "ps_placement": o.ps_placement if o.strategy == "parameter_server" else "",
                               "host": host, "predicted_bytes": predicted[host], "measured_bytes": measured,
                               "from_runs": [o.run_id]})
    return checks


def with_spread(observations: Sequence[Observation], **kwargs) -> Tuple[dict, spread_lib.Spread]:
    """(the parameters fitted on the runs with their refits kept as `spread`, the Spread)
    (tfbench.perfmodel.fitting.spread: a bootstrap over the runs)."""
    found = spread_lib.fit_spread(observations, fit, predicted_rate, **kwargs)
    return params_lib.with_spread(found.point, found.replicates, found.scatter.as_dict(), spread_lib.METHOD), found


def fit(observations: Sequence[Observation], compute_from: Optional[Sequence[Observation]] = None,
        like: Optional[dict] = None) -> dict:
    """A validated parameters document (tfbench.perfmodel.fitting.params) from the observations; compute
    per image and the links from `compute_from` when given (one strategy's overhead and share
    fitted on its own runs, its compute timed on every strategy's); with `like` (a fit of the same
    kind), the parameters that fit fitted, whatever these runs alone would allow."""
    data = params_lib.empty()
    data["compute"] = compute_entries(observations if compute_from is None else compute_from)
    data["links"] = link_entries(observations if compute_from is None else compute_from)
    data["ps_apply_s"] = ps_apply_entries(observations)
    data.update(per_strategy(observations, data, like))
    data["bytes_per_step"] = bytes_checks(observations)
    return params_lib.validate(data)
