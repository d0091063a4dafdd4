"""Parameters of the model fitted on tfbench runs (observations), each naming its runs.

- compute per image, per (model, mode, precision, image size, classes, batch, cores): the median
  of the runs' compute part per worker step (tfbench.measure.breakdown) over the batch, divided
  by how many workers shared a worker's cores (a run's core share: 2 workers pinned to one core
  compute about half as fast); a compute timed inside the step (synchronous ranks, one task) is
  preferred to a parameter server's derived one, and a single worker's (no all-reduce to overlap
  with its backward pass) to that of a cluster;
- each link (by --link_bandwidth): the median alpha and beta its runs' link probes measured;
- the ps apply of synchronous parameter servers: the median apply part;
- a synchronous ps link's two directions: full duplex, other workers' pulls and pushes
  interleaving (chi = 0 of tfbench.perfmodel.terms.duplex_s); several ps: the busiest shard as
  the run placed its variables (the observation's shard bytes), else |w|/k;
- per strategy, a fixed overhead per step and the share of the measured beta the strategy's
  protocol gets (gRPC, Gloo): both at once by scipy.optimize.least_squares on the runs' relative
  step-time errors, everything else held at the values above; with fewer than three runs, or
  runs that do not vary the bytes on the wire, the share stays 1 and only the overhead is fitted;
- bytes per step: each run's busiest ps and worker link, measured against the equations.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfbench.perfmodel import equations as eq
from tfbench.perfmodel import params as params_lib
from tfbench.perfmodel import prediction
from tfbench.perfmodel import sync_step
from tfbench.perfmodel.observations import Observation

MIN_RUNS_FOR_EFFICIENCY = 3
# A synchronous ps link is full duplex: other workers' pulls and pushes interleave on its two
# directions (terms.duplex_s, chi = 0), as predict assumes by default; sending them one after
# the other (chi = 1) predicted every held-out ps run of `make model` low, more so with more workers.
DUPLEX_CHI = 0.0
LOWEST_EFFICIENCY = 0.05


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
            efficiency: Optional[float] = None) -> Optional[prediction.Setting]:
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
    apply = (params_lib.strategy_value(data, "ps_apply_s", o.key) or {}).get("value_s", 0.0)
    # a synchronous step waits for the most crowded worker; asynchronous workers each go at their own pace
    share = o.core_share_mean if o.strategy == "parameter_server" and not o.ps_sync else o.core_share_max
    return prediction.Setting(
        strategy=o.strategy, w_bytes=o.w_bytes, compute_s=share * compute["ms_per_image"] * o.batch_size / 1e3,
        batch_size=o.batch_size, link=eq.Link(link["alpha_s"], link["beta_bps"] / 8).with_beta_share(efficiency),
        num_ps=max(1, o.num_ps), ps_placement=o.ps_placement if o.strategy == "parameter_server" else eq.SEPARATE,
        ps_sync=o.ps_sync, ps_apply_s=apply, overhead_s=overhead_s,
        extra=sync_step.Extra(shard_bytes=o.shard_bytes or None, shard_variables=o.shard_variables or None,
                              chi=DUPLEX_CHI))


def predicted_step_s(o: Observation, data: dict, **override) -> Optional[float]:
    s = setting(o, data, **override)
    return None if s is None else prediction.point(s, o.num_workers).step_s


def overhead_and_efficiency(observations: Sequence[Observation], data: dict) -> Tuple[dict, dict]:
    """(overhead_s table, link_efficiency table) per strategy key."""
    overheads, efficiencies = {}, {}
    by_key: Dict[str, List[Observation]] = {}
    for o in observations:
        if o.predicted and setting(o, data, 0.0, 1.0) is not None:
            by_key.setdefault(o.key, []).append(o)
    for key, group in sorted(by_key.items()):
        wire = {(round(setting(o, data, 0.0, 1.0).link.beta), o.num_workers) for o in group}
        free_efficiency = len(group) >= MIN_RUNS_FOR_EFFICIENCY and len(wire) >= 2

        def residuals(x, group=group, free=free_efficiency):
            eff = x[1] if free else 1.0
            return [(predicted_step_s(o, data, overhead_s=x[0], efficiency=eff) - o.step_s) / o.step_s for o in group]

        start = [0.0, 1.0] if free_efficiency else [0.0]
        bounds = ([0.0, LOWEST_EFFICIENCY], [np.inf, 1.0]) if free_efficiency else ([0.0], [np.inf])
        from scipy import optimize  # here: scipy takes a second to import, refusals need none

        result = optimize.least_squares(residuals, start, bounds=bounds)
        runs = _runs(group)
        overheads[key] = {"value_s": float(result.x[0]), "from_runs": runs}
        if free_efficiency:
            efficiencies[key] = {"value": float(result.x[1]), "from_runs": runs}
    return overheads, efficiencies


def bytes_checks(observations: Sequence[Observation]) -> List[dict]:
    """Each run's busiest ps and worker link per global step against the equations (sync: one
    pull and one push; async: a global step is N updates, the same bytes in all). Hosts holding a
    collocated shard send both its pulls and their worker's pushes."""
    checks = []
    for o in observations:
        if not o.bytes_per_step or not o.predicted:
            continue
        if o.strategy == "parameter_server":
            ps, worker = eq.ps_link_bytes(o.num_workers, o.w_bytes, max(1, o.num_ps), o.ps_placement)
            # collocated: a shard's host also sends its own worker's push to the other shards
            predicted = {"ps": ps if o.ps_placement == eq.SEPARATE else ps + worker, "worker": worker}
        else:
            predicted = {"worker": eq.ring_bytes_per_host(o.num_workers, o.w_bytes)}
        for host, measured in sorted(o.bytes_per_step.items()):
            if host in predicted:
                checks.append({"strategy": o.strategy, "num_workers": o.num_workers, "num_ps": o.num_ps,
                               "ps_placement": o.ps_placement if o.strategy == "parameter_server" else "",
                               "host": host, "predicted_bytes": predicted[host], "measured_bytes": measured,
                               "from_runs": [o.run_id]})
    return checks


def fit(observations: Sequence[Observation], compute_from: Optional[Sequence[Observation]] = None) -> dict:
    """A validated parameters document (tfbench.perfmodel.params) from the observations; compute
    per image and the links from `compute_from` when given (one strategy's overhead and share
    fitted on its own runs, its compute timed on every strategy's)."""
    data = params_lib.empty()
    data["compute"] = compute_entries(observations if compute_from is None else compute_from)
    data["links"] = link_entries(observations if compute_from is None else compute_from)
    data["ps_apply_s"] = ps_apply_entries(observations)
    data["overhead_s"], data["link_efficiency"] = overhead_and_efficiency(observations, data)
    data["bytes_per_step"] = bytes_checks(observations)
    return params_lib.validate(data)
