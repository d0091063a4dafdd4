"""Which parameter server holds which variable: a model's variables placed on k ps shards exactly
as the placer that runs them does, so that a prediction can use the busiest shard's bytes and
variable count instead of |w|/k (whole variables cannot be split below one variable's size
unless a partitioner splits them).

Placers (`placer=`):
- `round_robin`: TF2's tf.distribute.ParameterServerStrategy (what tfbench runs).
  parameter_server_strategy_v2._create_variable_round_robin puts the i-th variable it creates on
  ps task i mod k, in creation order; a variable created `colocate_with` another (optimizer
  slots, tfbench's synchronous accumulators) goes with it and does not advance the counter.
  With a `variable_partitioner`, every variable of rank >= 1 is first asked for its partitions
  on axis 0 (rank 0 is never split); more than one becomes a ShardedVariable of
  min(partitions, shape[0]) parts, the first shape[0] mod p of them one row longer ("div"
  partitioning: 10 rows in 4 parts are 3, 3, 2, 2), each part named NAME/part_i and placed
  round-robin like any variable.
    `fixed`    FixedShardsPartitioner(num_shards=k): min(k, shape[0]) partitions;
    `min_size` MinSizePartitioner(min_shard_bytes, max_shards=k)
               (partitioned_variables.min_max_variable_partitioner):
               max(1, min(shape[0], k, ceil(bytes / min_shard_bytes))) partitions.
- `greedy`: tf_cnn_benchmarks' distributed parameter_server mode (TF1's replica_device_setter
  with GreedyLoadBalancingStrategy(k, byte_size_load_fn)): each variable in creation order goes
  to the ps with the fewest bytes so far (the lowest index on a tie); no partitioner.

Only the standard library; the variables come from tfbench.measure.variables (counted from the
model's graph) or from a shipped list.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import List, Sequence, Tuple

PARTITIONERS = ("none", "min_size", "fixed")
PLACERS = ("round_robin", "greedy")
MIN_SHARD_BYTES = 256 << 10  # MinSizePartitioner's default, and tfbench's


@dataclasses.dataclass(frozen=True)
class Variable:
    """One variable as its model creates it: name, shape, bytes per element, trainable."""

    name: str
    shape: Tuple[int, ...]
    itemsize: int = 4
    trainable: bool = True

    @property
    def nbytes(self) -> int:
        return self.itemsize * math.prod(self.shape)


@dataclasses.dataclass(frozen=True)
class Piece:
    """A variable, or one part of a partitioned one, on its shard."""

    variable: Variable
    shard: int


@dataclasses.dataclass(frozen=True)
class Placement:
    num_ps: int
    pieces: Tuple[Piece, ...]

    def _trainable(self, shard: int, count: bool) -> int:
        """The trainable pieces of a shard: their bytes, or how many (count)."""
        return sum(1 if count else p.variable.nbytes for p in self.pieces if p.shard == shard and p.variable.trainable)

    @functools.cached_property
    def shard_bytes(self) -> Tuple[int, ...]:
        """Trainable bytes per shard: what each worker pulls from it and pushes to it per update."""
        return tuple(self._trainable(j, False) for j in range(self.num_ps))

    @functools.cached_property
    def shard_variables(self) -> Tuple[int, ...]:
        """Trainable variables (parts) per shard: a pull and a push message each per update."""
        return tuple(self._trainable(j, True) for j in range(self.num_ps))

    @property
    def busiest(self) -> int:
        """The shard with the most trainable bytes (the lowest index on a tie)."""
        sizes = self.shard_bytes
        return sizes.index(max(sizes))

    @property
    def largest(self) -> Piece:
        """The largest trainable piece (the first created on a tie)."""
        trainable = [p for p in self.pieces if p.variable.trainable] or list(self.pieces)
        return max(trainable, key=lambda p: p.variable.nbytes)

    @property
    def total_bytes(self) -> int:
        return sum(self.shard_bytes)


def partitions(variable: Variable, num_ps: int, partitioner: str = "none",
               min_shard_bytes: int = MIN_SHARD_BYTES) -> int:
    """How many parts the strategy splits `variable` into (1: kept whole)."""
    if partitioner not in PARTITIONERS:
        raise ValueError(f"partitioner {partitioner!r} is unknown; choose one of {', '.join(PARTITIONERS)}")
    if partitioner == "none" or not variable.shape:
        return 1
    rows = variable.shape[0]
    if partitioner == "fixed":
        asked = min(num_ps, rows)
    else:
        asked = max(1, min(rows, num_ps, math.ceil(variable.nbytes / min_shard_bytes)))
    return 1 if asked <= 1 else min(asked, rows)


def split_rows(rows: int, parts: int) -> List[int]:
    """'div' partitioning of axis 0: the first rows mod parts parts get one row more."""
    base, extra = divmod(rows, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def split(variable: Variable, parts: int) -> List[Variable]:
    if parts == 1:
        return [variable]
    return [dataclasses.replace(variable, name=f"{variable.name}/part_{i}", shape=(rows,) + variable.shape[1:])
            for i, rows in enumerate(split_rows(variable.shape[0], parts))]


def place(variables: Sequence[Variable], num_ps: int, partitioner: str = "none",
          min_shard_bytes: int = MIN_SHARD_BYTES, placer: str = "round_robin") -> Placement:
    """The variables (in creation order) on `num_ps` shards, as `placer` puts them."""
    if not (isinstance(num_ps, int) and num_ps >= 1):
        raise ValueError(f"num_ps must be a whole number >= 1, got {num_ps!r}")
    if placer not in PLACERS:
        raise ValueError(f"placer {placer!r} is unknown; choose one of {', '.join(PLACERS)}")
    if min_shard_bytes < 1:
        raise ValueError(f"min_shard_bytes must be positive, got {min_shard_bytes}")
    if placer == "greedy":  # each variable from the least-loaded shard on (tf_cnn_benchmarks; tfbench --ps_placer)
        loads = [0] * num_ps
        pieces = []
        for v in variables:
            start = loads.index(min(loads))
            for i, part in enumerate(split(v, partitions(v, num_ps, partitioner, min_shard_bytes))):
                shard = (start + i) % num_ps
                loads[shard] += part.nbytes
                pieces.append(Piece(part, shard))
        return Placement(num_ps, tuple(pieces))
    pieces, counter = [], 0
    for v in variables:
        for part in split(v, partitions(v, num_ps, partitioner, min_shard_bytes)):
            pieces.append(Piece(part, counter % num_ps))
            counter += 1
    return Placement(num_ps, tuple(pieces))


def from_records(records: Sequence[dict]) -> List[Variable]:
    """Variables from plain dicts {'name', 'shape', 'itemsize', 'trainable'} (a shipped or cached list)."""
    return [Variable(str(r["name"]), tuple(int(d) for d in r["shape"]), int(r.get("itemsize", 4)),
                     bool(r.get("trainable", True))) for r in records]


def describe(placement: Placement) -> str:
    """One line: the busiest shard and the shard holding the largest variable."""
    sizes, counts = placement.shard_bytes, placement.shard_variables
    big = placement.largest
    b = placement.busiest
    return (f"busiest ps shard {b}: {sizes[b] / 1e6:.2f} MB in {counts[b]} variables "
            f"(|w|/k = {placement.total_bytes / placement.num_ps / 1e6:.2f} MB); the largest variable, "
            f"{big.variable.name} {list(big.variable.shape)} ({big.variable.nbytes / 1e6:.2f} MB), is on shard "
            f"{big.shard}, which holds {sizes[big.shard] / 1e6:.2f} MB in {counts[big.shard]} variables")
