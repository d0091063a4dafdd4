"""The step of a recommender with embedding tables, per strategy, and where the parameter server
overtakes all-gather: bytes from the sparse laws (tfbench.perfmodel.sparse.laws), time from two
parameters per strategy fitted on measured runs.

One synchronous step at N workers of one core each:

  t(N) = c(N) + o + b(N) / (eta x beta)

- c(N): compute per step, the measured step split's compute part, fitted per strategy as a line in
  N (on a shared machine the workers' cores are oversubscribed as N grows; on dedicated hosts the
  slope fits to about 0);
- b(N): bytes the busiest host's link carries one way per step (tfbench.perfmodel.sparse.laws):
  all-gather, 2(N-1)/N |w_dense| + (N-1) u (row + 8); a parameter server with a ps on every host
  (k = N), the more of what a host sends and what it receives, the share (N-1)/N of each going to
  or coming from the other hosts: its worker's dense pull and push, its rows' pushes with their ids
  and the ids of its pulls (u (row + 16) out, u row in), and what its ps serves the N workers
  (n r_j row out, n r_j (row + 16) in), r_j the rows of the table shards on ps j one worker's batch
  touches: the model's variables split by the run's partitioner and placed round-robin as
  TensorFlow places them (tfbench.perfmodel.dense.shards), each shard's rows counted by the sparse law
  (hot_first ids: a table's hottest rows are its first, its first shard the busiest; hashed ids:
  every row equally likely to be a hot value's, a shard's rows in proportion to its size);
  the hybrid (tables on a ps on every host, the rest all-reduced): the ring's 2(N-1)/N |w_dense|
  plus the parameter server's rows (its worker's rows, and what its ps serves the N workers) with
  each row's index sent once, as int32 within its range (u (row + 4) out, u row in), r_j counted
  over the ranges the hybrid's shard rule puts on ps j (tfbench.perfmodel.sparse.ranges);
- beta: the link's rate (the probed rate of the run's emulated links); eta and o: the share of it
  the strategy's protocol reaches and its fixed cost per step (gRPC rounds, scheduling, the update
  on the ps), fitted by least squares on t - c(N) = o + (1/eta) b(N)/beta over the fitted runs.

The rate is N x batch / t examples/sec. The fit is made on small N (N <= 4) and judged on larger N
it never saw (validate).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfbench.perfmodel import intervals, protocols
from tfbench.perfmodel.dense import shards, terms
from tfbench.perfmodel.sparse import laws as sparse
from tfbench.perfmodel.sparse import ranges

PS, ALL_GATHER, HYBRID = protocols.PS, protocols.ALL_GATHER, protocols.HYBRID


@dataclasses.dataclass(frozen=True)
class Setting:
    """What a recommender step is, independent of the strategy and N."""

    table_rows: Sequence[int]
    embedding_dim: int
    ids_per_feature: int
    zipf_alpha: float
    batch_size: int
    dense_bytes: float  # the MLPs' parameters x 4
    dense_features: int = 13
    bottom: Tuple[int, ...] = (64, 32)  # the MLPs' hidden layers (tfbench.workloads.recommender)
    top: Tuple[int, ...] = (64, 32)
    partitioner: str = "min_size"  # how a parameter server splits the variables (--ps_partitioner)
    min_shard_bytes: int = shards.MIN_SHARD_BYTES
    id_layout: str = "hot_first"  # each value's row (--id_layout; runs before it was a flag: hot_first)
    shard_rule: str = "rotated"  # where the hybrid's table ranges live (--hybrid_shard_rule)

    @property
    def row_bytes(self) -> float:
        return 4.0 * self.embedding_dim

    def rows_per_worker(self) -> float:
        """E[distinct rows one worker's step touches], all tables."""
        return sparse.expected_unique_tables(self.table_rows, self.zipf_alpha, self.batch_size * self.ids_per_feature)

    def variables(self) -> List[shards.Variable]:
        """The model's variables in the order tf_keras creates them (tfbench.models.dlrm): the bottom
        MLP's kernels and biases, the tables, the top MLP's."""
        out: List[shards.Variable] = []

        def dense(name: str, widths: Sequence[int]) -> None:
            for i, (a, b) in enumerate(zip(widths, widths[1:])):
                out.extend([shards.Variable(f"{name}_{i}/kernel", (a, b)), shards.Variable(f"{name}_{i}/bias", (b,))])

        dense("bottom", [self.dense_features, *self.bottom, self.embedding_dim])
        out += [shards.Variable(f"table_{t}/embeddings", (rows, self.embedding_dim))
                for t, rows in enumerate(self.table_rows)]
        n = len(self.table_rows) + 1
        dense("top", [self.embedding_dim + n * (n - 1) // 2, *self.top, 1])
        return out

    def rows_per_shard(self, num_ps: int) -> List[float]:
        """E[distinct rows one worker's step touches on each ps], the tables split and placed as
        TensorFlow's partitioner and round-robin placer put them."""
        return list(_rows_per_shard(self, num_ps))

    def _rows_per_shard(self, num_ps: int) -> Tuple[float, ...]:
        placed = shards.place(self.variables(), num_ps, self.partitioner, self.min_shard_bytes)
        draws, out = self.batch_size * self.ids_per_feature, [0.0] * num_ps
        for t, rows in enumerate(self.table_rows):
            start = 0
            for piece in [p for p in placed.pieces if p.variable.name.startswith(f"table_{t}/")]:
                end = start + piece.variable.shape[0]
                if self.id_layout == "hashed":  # hot values anywhere: a shard's rows in proportion to its size
                    out[piece.shard] += sparse.expected_unique(rows, self.zipf_alpha, draws) * (end - start) / rows
                else:
                    out[piece.shard] += sparse.expected_unique(rows, self.zipf_alpha, draws, start, end)
                start = end
        return tuple(out)

    def rows_per_range_ps(self, num_ps: int) -> List[float]:
        """E[distinct rows one worker's step touches on each ps] under the hybrid's shard rule."""
        draws, out = self.batch_size * self.ids_per_feature, [0.0] * num_ps
        for rows, placed in zip(self.table_rows, ranges.placed(self.table_rows, num_ps, self.shard_rule)):
            for start, end, k in placed:
                if self.id_layout == "hashed":  # hot values anywhere: a range's rows in proportion to its size
                    out[k] += sparse.expected_unique(rows, self.zipf_alpha, draws) * (end - start) / rows
                else:
                    out[k] += sparse.expected_unique(rows, self.zipf_alpha, draws, start, end)
        return out


@functools.lru_cache(maxsize=4096)
def _rows_per_shard(setting: Setting, num_ps: int) -> Tuple[float, ...]:
    return setting._rows_per_shard(num_ps)  # noqa: SLF001 - its cache


def busiest_host_bytes(kind: str, n: int, setting: Setting) -> float:
    """b(N): bytes the busiest host's link carries one way per step (module docstring)."""
    if n <= 1:
        return 0.0
    row, u = setting.row_bytes, setting.rows_per_worker()
    dense = setting.dense_bytes
    if kind == HYBRID:  # the ring, and the parameter server's rows without its dense pulls and pushes
        share, ids, busiest = (n - 1) / n, sparse.RANGE_INDEX_BYTES, max(setting.rows_per_range_ps(n))
        sent = u * (row + ids) + n * busiest * row  # the indices sent once, with the pull
        received = u * row + n * busiest * (row + ids)
        return 2 * share * dense + share * max(sent, received)
    if kind != PS:
        return 2 * (n - 1) / n * dense + sparse.allgather_bytes(n, u, row)
    share, ids = (n - 1) / n, sparse.INDEX_BYTES
    busiest = max(setting.rows_per_shard(n))
    sent = dense + u * (row + 2 * ids) + dense + n * busiest * row
    received = dense + u * row + dense + n * busiest * (row + 2 * ids)
    return share * max(sent, received)


@dataclasses.dataclass(frozen=True)
class Observation:
    run_id: str
    kind: str  # PS or ALL_GATHER
    strategy: str
    n: int
    step_s: float  # the cluster's mean global step
    compute_s: float  # the step split's compute part
    link_bytes_per_s: float  # beta: the emulated links' probed rate (one way)
    setting: Setting
    step_ci_s: float = 0.0  # the 95% half-width of the run's mean step (its own steps' spread)

    @property
    def rate(self) -> float:
        return self.n * self.setting.batch_size / self.step_s


@dataclasses.dataclass(frozen=True)
class Fit:
    """One strategy's parameters: compute c(N) = c0 + c1 N, overhead o, protocol share eta."""

    strategy: str
    c0: float
    c1: float
    overhead_s: float
    eta: float
    fitted_on: Sequence[int]

    def step_s(self, kind: str, n: int, setting: Setting, link_bytes_per_s: float) -> float:
        compute = max(0.0, self.c0 + self.c1 * n)
        if n <= 1:
            return compute + self.overhead_s
        return compute + self.overhead_s + busiest_host_bytes(kind, n, setting) / (self.eta * link_bytes_per_s)

    def rate(self, kind: str, n: int, setting: Setting, link_bytes_per_s: float) -> float:
        return n * setting.batch_size / self.step_s(kind, n, setting, link_bytes_per_s)


def fit(observations: Sequence[Observation]) -> Fit:
    """Least squares over one strategy's runs: compute as a line in N, then (o, 1/eta)."""
    obs = list(observations)
    ns = np.array([o.n for o in obs], dtype=float)
    compute = np.array([o.compute_s for o in obs])
    if len(set(ns)) > 1:
        c1, c0 = np.polyfit(ns, compute, 1)
    else:
        c1, c0 = 0.0, float(compute.mean())
    rest = np.array([o.step_s for o in obs]) - (c0 + c1 * ns)
    x = np.array([busiest_host_bytes(o.kind, o.n, o.setting) / o.link_bytes_per_s for o in obs])
    if np.count_nonzero(x) == 0:
        return Fit(obs[0].strategy, c0, c1, float(rest.mean()), 1.0, sorted({o.n for o in obs}))
    (overhead, inverse_eta), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), rest, rcond=None)
    inverse_eta = max(inverse_eta, 1.0)  # no protocol beats the line rate
    overhead = float(np.mean(rest - inverse_eta * x))
    return Fit(obs[0].strategy, float(c0), float(c1), overhead, 1.0 / inverse_eta, sorted({o.n for o in obs}))


def refits(observations: Sequence[Observation], draws: int = 200, seed: int = 20261127) -> List[Fit]:
    """The fit of one strategy's runs redone on `draws` copies whose step and compute times are
    drawn about the measured ones with each run's own spread (its 95% half-width / 1.96, at least
    2% of its mean step: runs repeated on this shared machine move by that much): the spread of
    the fitted parameters that the runs' own variation allows."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        copies = []
        for o in observations:
            sigma = max(o.step_ci_s / 1.96, 0.02 * o.step_s)
            step = max(1e-6, o.step_s + rng.normal(0.0, sigma))
            compute = max(0.0, o.compute_s + rng.normal(0.0, sigma * o.compute_s / o.step_s))
            copies.append(dataclasses.replace(o, step_s=step, compute_s=compute))
        out.append(fit(copies))
    return out


def fit_all(observations: Sequence[Observation], max_n: int) -> Dict[str, Fit]:
    by_strategy: Dict[str, List[Observation]] = {}
    for o in observations:
        if o.n <= max_n:
            by_strategy.setdefault(o.strategy, []).append(o)
    return {s: fit(obs) for s, obs in by_strategy.items()}


def crossover(fits: Dict[str, Fit], kinds: Dict[str, str], setting: Setting, link_bytes_per_s: float,
              workers: Sequence[int], ahead: str = PS, behind: Sequence[str] = (ALL_GATHER,)) -> Optional[int]:
    """The fewest workers (of `workers`) at which every strategy of kind `ahead` (the parameter
    server) is predicted above every strategy of the kinds `behind` (all-gather), from there on;
    None if it never is (or either side has no fitted strategy)."""
    return crossover_of(lambda s, n: fits[s].rate(kinds[s], n, setting, link_bytes_per_s),
                        {s: kinds[s] for s in fits}, workers, ahead, behind)


@dataclasses.dataclass(frozen=True)
class Spread:
    """What a prediction's interval is drawn from: the fit redone on copies of its runs (their own
    step-time spread) and a new run's scatter about the fit, from the fitted runs' relative
    residuals (their median absolute deviation, at least the 2% repeated runs move by on this
    shared machine) with the degrees of freedom the step's least squares leaves, runs - 2 (o and
    eta; at least 1), as Student t."""

    refits: Sequence[Fit]
    scale: float
    dof: float
    fitted_runs: int

    def interval(self, point_fit: Fit, kind: str, n: int, setting: Setting, link_bytes_per_s: float,
                 level: float = intervals.LEVEL) -> intervals.Interval:
        point = point_fit.rate(kind, n, setting, link_bytes_per_s)
        draws = intervals.scatter_draws(self.dof, len(self.refits))
        samples = [f.rate(kind, n, setting, link_bytes_per_s) * max(0.05, 1 + self.scale * d)
                   for f, d in zip(self.refits, draws)]
        return intervals.from_samples(point, samples, level, f"{len(self.refits)} refits x t({self.dof:g}) scatter "
                                                             f"{self.scale:.1%} over {self.fitted_runs} runs")


NOISE_FLOOR = 0.02  # runs repeated on this shared machine move by about this much


def spread(observations: Sequence[Observation], point_fit: Fit, draws: int = 200) -> Spread:
    obs = list(observations)
    residuals = [o.step_s / point_fit.step_s(o.kind, o.n, o.setting, o.link_bytes_per_s) - 1 for o in obs]
    _, mad = intervals.robust_scale(residuals) if len(residuals) > 1 else (0.0, 0.0)
    return Spread(refits(obs, draws), max(NOISE_FLOOR, mad), float(max(1, len(obs) - 2)), len(obs))


def spreads(observations: Sequence[Observation], fits: Dict[str, Fit], max_n: int) -> Dict[str, Spread]:
    """Each fitted strategy's Spread: the refits of its own runs (N <= max_n), and a new run's
    scatter from the residuals of every strategy whose step has the same form (its kind: the
    all-gather strategies share one), each about its own fit, pooled: their median absolute
    deviation (at least NOISE_FLOOR), with the degrees of freedom of them all, the sum of each
    strategy's runs - 2."""
    fitted = {s: [o for o in observations if o.strategy == s and o.n <= max_n] for s in fits}
    kind_of = {s: obs[0].kind for s, obs in fitted.items() if obs}
    pooled: Dict[str, Tuple[float, float]] = {}
    for kind in set(kind_of.values()):
        residuals, dof = [], 0.0
        for s in (s for s, k in kind_of.items() if k == kind):
            residuals += [o.step_s / fits[s].step_s(o.kind, o.n, o.setting, o.link_bytes_per_s) - 1 for o in fitted[s]]
            dof += max(0, len(fitted[s]) - 2)
        _, mad = intervals.robust_scale(residuals) if len(residuals) > 1 else (0.0, 0.0)
        pooled[kind] = (max(1.0, dof), max(NOISE_FLOOR, mad))
    out = {}
    for s, obs in fitted.items():
        dof, scale = pooled[kind_of[s]]
        out[s] = Spread(refits(obs), scale, dof, len(obs))
    return out


def crossover_interval(fits: Dict[str, Fit], spreads_: Dict[str, Spread], kinds: Dict[str, str], setting: Setting,
                       link_bytes_per_s: float, max_n: int, level: float = intervals.LEVEL):
    """(point, low, high) of the fewest workers from which the parameter server stays ahead, over
    every N of 2..max_n: the point from the fits, the ends the (1 - level)/2 and (1 + level)/2
    quantiles over the strategies' refits, each scaled by a draw of its scatter (independent draws
    per strategy); None for a crossover past max_n (never, as far as looked)."""
    workers = list(range(2, max_n + 1))
    point = crossover(fits, kinds, setting, link_bytes_per_s, workers)
    if len(set(kinds[s] for s in spreads_)) < 2:
        return point, None, None
    draws = min(len(sp.refits) for sp in spreads_.values())
    scaled = {s: [max(0.05, 1 + sp.scale * d) for d in intervals.scatter_draws(sp.dof, draws, intervals.SEED + i)]
              for i, (s, sp) in enumerate(sorted(spreads_.items()))}
    found = []
    for i in range(draws):
        rates = {s: [sp.refits[i].rate(kinds[s], n, setting, link_bytes_per_s) * scaled[s][i] for n in workers]
                 for s, sp in spreads_.items()}
        ps = [s for s in rates if kinds[s] == PS]
        gather = [s for s in rates if kinds[s] == ALL_GATHER]  # the hybrid is neither side
        ahead = [min(rates[s][j] for s in ps) > max(rates[s][j] for s in gather) for j in range(len(workers))]
        first = next((workers[j] for j in range(len(workers)) if all(ahead[j:])), None)
        found.append(first if first is not None else np.inf)
    low, high = np.quantile(np.asarray(found, dtype=float), [(1 - level) / 2, (1 + level) / 2])
    return point, (None if np.isinf(low) else int(low)), (None if np.isinf(high) else int(high))


def crossover_text(point, low, high, max_n: int, span: str = f"{intervals.LEVEL:.0%} interval") -> str:
    """The crossover as an interval of N (or, with no fit, a range), in words."""
    beyond = f"beyond {max_n}"
    ends = f"{span} of N: {low if low is not None else beyond} to {high if high is not None else beyond}"
    if point is None:
        return f"no crossover up to N={max_n}: the parameter server is not predicted to stay ahead of all-gather ({ends})"
    return (f"crossover at N={point}: the parameter server is predicted ahead of all-gather from there on ({ends})")


def unfitted_step_s(kind: str, n: int, setting: Setting, link_bytes_per_s: float, compute_s: float,
                    values: Dict[str, float]) -> float:
    """The step with nothing fitted (tfbench.perfmodel.fitting.nofit): compute per step as given, the
    busiest host's bytes at the share `values["share"]` of the link, overlapped with compute as
    `values["phi"]` says (terms.overlapped_s), plus the overhead `values["overhead_s"]`."""
    communication = busiest_host_bytes(kind, n, setting) / (values["share"] * link_bytes_per_s) if n > 1 else 0.0
    return terms.overlapped_s(compute_s, communication, values["phi"]) + values["overhead_s"]


def crossover_of(rate, kinds: Dict[str, str], workers: Sequence[int], ahead: str = PS,
                 behind: Sequence[str] = (ALL_GATHER,)) -> Optional[int]:
    """The fewest workers (of `workers`) from which every strategy of kind `ahead` (a parameter
    server) has its rate(strategy, n) above every strategy's of the kinds `behind` (all-gather);
    None if it never is (the hybrid, of neither kind, is on neither side unless named)."""
    ps = [s for s in kinds if kinds[s] == ahead]
    gather = [s for s in kinds if kinds[s] in behind]
    if not ps or not gather:
        return None
    wins = [n for n in workers if min(rate(s, n) for s in ps) > max(rate(s, n) for s in gather)]
    for i, n in enumerate(workers):
        if wins and wins == list(workers[i:]):
            return n
    return None
