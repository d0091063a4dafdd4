"""Staleness of parameter-server updates: how many updates the ps applied between the version of
the parameters a worker read and the version its own update was applied to.

A version counter lives on the ps. Asynchronous training: each closure reads it as it starts,
beside its reads of the weights (under a staleness bound: before them), and increments it once its
update is applied (after the optimizer counted the update, which it does once every write is
done); the increment's result says how many other updates came in between (staleness = new
version - 1 - version read). Synchronous training: the counter is the global step the update on
the ps increments, so a gradient read at version v and applied by the update that makes it v + 1
has staleness 0. The counter is exact for its own order; an update of another closure in flight
whose weights land on one side of a read or apply and whose increment lands on the other makes a
value differ from the weights' true age by that closure (unbounded, in either direction: the
counter and the weights are read side by side).
"""
from __future__ import annotations

import bisect
import collections
from typing import Dict, Iterable, List, Tuple

DEFINITION = ("updates the ps applied between the version a worker read (beside its weights, as its update "
              "began; under a staleness bound, before them) and the update its gradient went into: new version "
              "- 1 - version read (sync: 0 when the gradient is applied by the global step it was computed for)")


def summary(values: Iterable[int]) -> Dict:
    """max, mean and histogram ({staleness: updates}) of one worker's (or all) updates."""
    values = [int(v) for v in values]
    if not values:
        return {"updates": 0}
    counts = collections.Counter(values)
    return {"updates": len(values), "max": max(values), "mean": sum(values) / len(values),
            "histogram": {str(k): counts[k] for k in sorted(counts)}}


def by_worker(pairs: Iterable[Tuple[int, int]]) -> Dict[str, Dict]:
    """(worker, staleness) pairs -> {'all': summary, 'worker_<i>': summary, ...}."""
    grouped: Dict[int, List[int]] = collections.defaultdict(list)
    for worker, value in pairs:
        grouped[int(worker)].append(int(value))
    out = {"all": summary(v for values in grouped.values() for v in values)}
    out.update({f"worker_{w}": summary(values) for w, values in sorted(grouped.items())})
    return out


CLOCK_DEFINITION = ("stale-synchronous clocks: for an update made after c earlier updates of its worker, the most "
                    "updates of any other worker among that worker's first c that the weights it read did not yet "
                    "hold (0: it saw every worker's first c updates, as in lockstep); computed from the version "
                    "counter alone")


def clock_staleness(updates: Iterable[Dict]) -> Dict[int, int]:
    """{applied version: clock staleness} of asynchronous updates (dicts with worker, read and
    applied versions), as a stale-synchronous bound s limits it: at most s.

    An update applied as version a, after c earlier updates of its worker (applied before a),
    read the weights after version r: it holds the updates of worker j applied at
    versions <= r (each counted after its weights were written), so it misses
    c - (worker j's updates applied by version r) of worker j's first c. Every update of the
    run must be given, warm-up included, since clocks count from the first.
    """
    updates = [u for u in updates if u.get("applied", -1) >= 0]
    applied: Dict[int, List[int]] = collections.defaultdict(list)
    for u in updates:
        applied[int(u["worker"])].append(int(u["applied"]))
    for versions in applied.values():
        versions.sort()
    out = {}
    for u in updates:
        worker, read, version = int(u["worker"]), int(u["read"]), int(u["applied"])
        clock = bisect.bisect_left(applied[worker], version)
        behind = [clock - bisect.bisect_right(versions, read) for w, versions in applied.items() if w != worker]
        out[version] = max([0] + behind)
    return out
