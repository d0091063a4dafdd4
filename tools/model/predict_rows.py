"""What `python -m tools.model predict` prints once its flags and facts are resolved: the header
(where every input came from, how the intervals were made), and one row per worker count with
its step, parts, rate as `predicted [low, high]`, bottleneck and, with prices, its cost.

The interval: with a parameters file that keeps its refits (tools.model fit), 90% of each refit's
prediction times a new run's scatter (tfbench.perfmodel.fitting.spread); what the file and the
command line leave unset (the protocol's share of beta, a synchronous ps's chi, the overhead, the
ps's apply, the overlap of communication with compute) takes its point and range by the no-fit rule
(tfbench.perfmodel.fitting.nofit, from what tfbench's fits measured) and the interval spans every end.
"""
from __future__ import annotations

import itertools
import math
from typing import Dict, List, Optional

from absl import flags

from tfbench.perfmodel import cost, intervals
from tfbench.perfmodel.dense import prediction, shards, sync_step, terms
from tfbench.perfmodel.fitting import measured, nofit
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel.fitting import spread as spread_lib
from tfbench.perfmodel.dense.equations import SEPARATE
from tfbench.perfmodel.render import INTERVAL, NUMBER, TEXT, Column
from tools.model import pricing

FLAGS = flags.FLAGS
# Accepted with every strategy, so that one command line compares strategies by --strategy alone;
# the header says when they were ignored.
PS_ONLY = ("num_ps", "ps_placement", "ps_sync", "ps_apply_ms")
ASSUMPTIONS = ("compute per worker constant in N (strong scaling: c0 + c x G/N)", "no contention beyond the named "
               "links and the core (full bisection unless given)", "overlap of communication with computation as "
               "--overlap_phi says (1: none), or with nothing fitted ranged from none to all", "stragglers only as --compute_cv says (0: none)",
               "devices inside a node aggregate before the network")
def header(setting: prediction.Setting, counted: dict, facts: dict, placed=None) -> List[str]:
    f, s, link = FLAGS, setting, facts["link"]
    if s.strategy == "parameter_server":
        where = "on hosts of their own" if s.ps_placement == SEPARATE else "collocated: ps j on worker node j's host"
        k = "one ps per worker node (k = nodes)" if f.ps_per_worker else (
            f"{int(s.num_ps)} ps" + (" (--num_ps=0: one, as tfbench)" if f.num_ps == 0 else ""))
        what = f"parameter_server, {'sync' if s.ps_sync else 'async'}, {k} {where}"
        step = ("one global step = one update from every worker's gradient; communication = the busiest link's "
                "pulls and pushes (full duplex), messages, intra-node aggregation" if s.ps_sync else
                "one global step = N updates, one per worker on average; communication = pull + push, with the "
                "queueing at saturated ps links (queueing at a saturated ps apply is in apply_ms); the asynchronous "
                "equations spread |w| evenly over the k ps")
    else:
        what = f"{s.strategy} ({'binomial-tree' if s.strategy == 'tree' else 'ring'} all-reduce)"
        ignored = [f"--{name}" for name in PS_ONLY if f[name].present]
        what += f"; {', '.join(ignored)} ignored (parameter_server only)" if ignored else ""
        step = "one global step = compute, then one all-reduce of |w|; communication = the all-reduce"
    batch = (f"global batch {f.global_batch_size} split over the N workers (G/N each)" if f.global_batch_size
             else f"batch {f.batch_size} per worker")
    lines = [
        f"tfbench performance model: {what}; {f.model} {f.mode} {f.precision} {f.image_size}px "
        f"{f.num_classes} classes, {batch}",
        f"|w| = {s.w_bytes / 1e6:.1f} MB: {counted['params']:,} trainable parameters in {counted['variables']} "
        f"variables x 4 bytes (variables stay fp32 under every --precision; counted from the model's graph)",
    ]
    if placed is not None:
        lines.append(f"ps placement (--ps_partitioner={f.ps_partitioner}, --ps_placer={f.ps_placer}, k = {placed.num_ps}, as tfbench's "
                     f"ParameterServerStrategy places them): {shards.describe(placed)}")
    d = f.devices_per_node
    lines += [
        f"nodes: {d} worker{'s' if d > 1 else ''} (devices) per node, ceil(N/{d}) nodes on the network"
        + (f"; inside a node they aggregate over {f.intra_node_link} ({terms.INTRA_NODE[f.intra_node_link][1]})"
           if d > 1 else ""),
        f"link alpha = {link.link.alpha_s * 1e3:.3f} ms per message, {link.alpha_source}",
        f"link beta = {link.link.beta / 1e6:.1f} MB/s each direction, {link.beta_source}",
        f"share of beta the strategy's protocol gets = {facts['share'][0]:.3f}, {facts['share'][1]}",
        "network core: " + (f"{f.fabric_capacity:g} Gbit/s aggregate (given); {core_binds(s)}" if f.fabric_capacity else
                             f"oversubscribed {f.oversubscription:g}:1 (given)" if f.oversubscription else
                             "full bisection (assumed: give --fabric_capacity or --oversubscription)"),
        f"compute = {facts['ms']:g} ms per image x batch {s.batch_size} = {s.compute_s * 1e3:.1f} ms per worker step, "
        f"{facts['compute_source']}" + (f"; {f.compute_ms_per_step:g} ms of it per step, the rest per image"
                                        if f.global_batch_size else ""),
        f"duplex chi = {facts['chi'][0]:.3g} (share of a link's two directions that does not overlap), "
        f"{facts['chi'][1]}",
        f"terms: overlap phi = {facts['phi'][0]:g} ({facts['phi'][1]}), per-message cost {f.per_message_us:g} us, stragglers compute "
        f"cv = {f.compute_cv:g} (given or default)",
    ]
    if s.strategy == "parameter_server":
        lines.append(f"ps apply = {s.ps_apply_s * 1e3:g} ms per update of |w| (each shard 1/k of it), "
                     f"{facts['apply_s'][1]}")
    lines += [f"overhead = {s.overhead_s * 1e3:g} ms per step, {facts['overhead_s'][1]}", f"step: {step}"]
    return lines


def _extra(placed, fabric_bps: float, nodes_for_core: int, link_beta: float, compute_s: float, chi: float,
           phi: float):
    f = FLAGS
    fabric = (f.fabric_capacity * 1e9 / 8 if f.fabric_capacity else
              terms.fabric_capacity(nodes_for_core, link_beta, f.oversubscription) if f.oversubscription else None)
    return sync_step.Extra(
        shard_bytes=placed.shard_bytes if placed is not None else None,
        shard_variables=placed.shard_variables if placed is not None else None,
        devices_per_node=f.devices_per_node, intra_node=f.intra_node_link, chi=chi, phi=phi,
        per_message_s=f.per_message_us / 1e6, sigma_s=f.compute_cv * compute_s, fabric=fabric)


def core_binds(s: prediction.Setting) -> str:
    """From how many nodes the given core, not the host links, sets the communication."""
    k_of = (lambda nodes: nodes) if FLAGS.ps_per_worker else (lambda nodes: FLAGS.num_ps or 1)  # noqa: E731
    n = sync_step.core_binds_at(s.w_bytes, s.link, k_of, s.ps_placement, s.extra,
                                ring_strategy=s.strategy != "parameter_server")
    return f"it binds from {n} nodes on" if n else "it never binds before the host links do"


def _with(facts: dict, values: Dict[str, float]) -> dict:
    """The facts with some values replaced (a corner of the unknowns' ranges)."""
    return {**facts, **{name: (value, facts[name][1]) for name, value in values.items()}}


def interval_lines(facts: dict, refits: List[dict], data: Optional[dict], unknowns: Dict[str, nofit.Unknown]
                   ) -> List[str]:
    """How the intervals were made."""
    lines = []
    if refits:
        scatter = data["spread"]["scatter"]
        lines.append(f"interval: {intervals.LEVEL:.0%}, from {len(refits)} refits of the fit (--params) and a new "
                     f"run's scatter of {math.expm1(scatter['scale']):.1%} about them (the residuals of "
                     f"{len(scatter['errors'])} runs adjusted for leverage; {data['spread']['method']})")
    elif FLAGS.params:
        lines.append("interval: the parameters file keeps no refits (fitted before tfbench kept them): no spread "
                     "from the fit")
    if unknowns or not refits:  # with refits the scatter is the fit's own
        lines.append(f"interval: every prediction over the ranges of what nothing here fits, each point by the "
                     f"no-fit rule (tfbench.perfmodel.fitting.nofit): {nofit.describe(unknowns, not refits)}; "
                     f"{measured.SOURCE}")
    return lines


class Model:
    """The predictions of one command line: settings per N (shards placed once per k), rates,
    intervals and rows."""

    def __init__(self, counted: dict, variables):
        self.counted, self.variables = counted, variables
        self.w = float(sum(v.nbytes for v in variables if v.trainable)) if variables else 4.0 * counted["params"]
        self._placed: Dict[int, shards.Placement] = {}

    def unknowns(self, facts: dict) -> Dict[str, nofit.Unknown]:
        """What the facts leave unknown, with its point and range by the no-fit rule."""
        key = params_lib.strategy_key(FLAGS.strategy, FLAGS.ps_sync)
        return nofit.unknowns(key, self.w, sorted(facts["assumed"]), link_measured=facts["link_measured"])

    def prepare(self, facts: dict) -> dict:
        """The facts with every unknown at the no-fit rule's point, its source saying so."""
        found = self.unknowns(facts)
        return {**facts, **{name: (u.point, f"no fit: the rule's point in [{u.low:.3g}, {u.high:.3g}] "
                                            "(tfbench.perfmodel.fitting.nofit)") for name, u in found.items()}}

    def num_ps(self, n: int) -> int:
        return terms.nodes(n, FLAGS.devices_per_node) if FLAGS.ps_per_worker else (FLAGS.num_ps or 1)

    def placed(self, k: int):
        if self.variables and k not in self._placed:
            self._placed[k] = shards.place(self.variables, k, FLAGS.ps_partitioner, FLAGS.ps_min_shard_bytes,
                                           FLAGS.ps_placer)
        return self._placed.get(k)

    def setting(self, n: int, facts: dict) -> prediction.Setting:
        f = FLAGS
        link = facts["link"].link.with_beta_share(facts["share"][0])
        compute = f.batch_size * facts["ms"] / 1e3 + (f.compute_ms_per_step / 1e3 if f.global_batch_size else 0.0)
        k = self.num_ps(n)
        extra = _extra(self.placed(k), 0.0, terms.nodes(n, f.devices_per_node), link.beta, compute, facts["chi"][0],
                       facts["phi"][0])
        return prediction.Setting(
            strategy=f.strategy, w_bytes=self.w, compute_s=compute, batch_size=f.batch_size, link=link, num_ps=k,
            ps_placement=f.ps_placement, ps_sync=f.ps_sync, ps_apply_s=facts["apply_s"][0],
            overhead_s=facts["overhead_s"][0], extra=extra, global_batch_size=f.global_batch_size,
            compute_per_step_s=f.compute_ms_per_step / 1e3)

    def rate(self, n: int, facts: dict) -> float:
        return prediction.point(self.setting(n, facts), n).images_per_sec

    def interval(self, n: int, facts: dict, refits: List[dict], scatter: Optional[spread_lib.Scatter]):
        """The rate at N: 90% of the refits' samples, spanned over the corners of the unknowns'
        ranges; without refits, the range over those corners."""
        found = self.unknowns(facts)
        if not refits:
            return nofit.span(lambda corner: self.rate(n, _with(facts, corner)), found)
        spans = []
        for corner in nofit.corners(found):
            at = _with(facts, corner)
            spread = spread_lib.Spread(at, tuple(_with(r, corner) for r in refits), scatter, len(scatter.errors))
            spans.append(spread.interval(lambda fx: self.rate(n, fx)))
        return intervals.span(self.rate(n, facts), spans, spans[0].basis)

    def nodes(self, n: int) -> int:
        separate = self.num_ps(n) if FLAGS.strategy == "parameter_server" and FLAGS.ps_placement == SEPARATE else 0
        return cost.nodes(n, FLAGS.devices_per_node, separate)

    def rows(self, counts: List[int], facts: dict, refits: List[dict], data: Optional[dict], prices: cost.Prices,
             unit: cost.Unit = cost.IMAGES):
        """(header lines, rows, columns) of the asked worker counts; the rate and cost columns
        are named after the unit of work (unit.rate, unit.usd, unit.joules)."""
        scatter = scatter_of(data, refits)
        facts = self.prepare(facts)
        rate_1 = self.rate(1, facts)
        rows = []
        for n in counts:
            p = prediction.point(self.setting(n, facts), n)
            gb = lambda v: None if v is None else v / 1e9  # noqa: E731
            rows.append({"num_workers": n, "step_ms": p.step_s * 1e3, "compute_ms": p.compute_s * 1e3,
                         "communication_ms": p.communication_s * 1e3, "apply_ms": p.apply_s * 1e3,
                         "overhead_ms": p.overhead_s * 1e3, unit.rate: self.interval(n, facts, refits, scatter),
                         "scaling_efficiency": p.images_per_sec / (n * rate_1), "bottleneck": p.bottleneck,
                         "updates_per_sec": p.updates_per_sec, "algbw_GBps": gb(p.algbw), "busbw_GBps": gb(p.busbw),
                         "nodes": self.nodes(n)})
        pricing.add(rows, prices, unit.rate, unit=unit)
        last = max(counts)
        lines = header(self.setting(last, facts), self.counted, facts, self.placed(self.num_ps(last)))
        lines += interval_lines(facts, refits, data, self.unknowns(facts)) + ([pricing.line(prices)] if prices.given
                                                                              else [])
        return lines, rows, columns(FLAGS.strategy, prices, unit)


def scatter_of(data: Optional[dict], refits: List[dict]) -> Optional[spread_lib.Scatter]:
    """The scatter the parameters file keeps with its refits (None without refits)."""
    return spread_lib.Scatter.from_dict(data["spread"]["scatter"]) if refits else None


def columns(strategy: str, prices: cost.Prices, unit: cost.Unit = cost.IMAGES) -> List[Column]:
    names = [Column("num_workers", NUMBER, 0), Column("step_ms"), Column("compute_ms"), Column("communication_ms"),
             Column("apply_ms"), Column("overhead_ms"), Column(unit.rate, INTERVAL),
             Column("scaling_efficiency", NUMBER, 3), Column("bottleneck", TEXT)]
    names += ([Column("updates_per_sec")] if strategy == "parameter_server"
              else [Column("algbw_GBps", NUMBER, 3), Column("busbw_GBps", NUMBER, 3)])
    return names + ([Column("nodes", NUMBER, 0)] + pricing.columns(prices, unit=unit) if prices.given else [])
