"""What a traced step does with the embedding tables, read from its graph (nested graphs included):
which ops move or update rows and where they were asked to run, which tensors cross from one job to
another, which collectives it calls on what shapes, and whether any tensor in it is as large as a
table shard (a dense gradient of a table, or a whole read of one). The records' `step_graph`
(tests/test_sparse_paths.py reads it): the path a strategy's step takes, as TensorFlow traced it,
not as a formula says it should.
"""
from __future__ import annotations

import collections
import re
from typing import Dict, Iterable, List

_ROW_OPS = re.compile(r"Scatter|Gather|SparseApply")
_COLLECTIVE = re.compile(r"^Collective|AllReduce|Allreduce|Allgather|AllGather|^Horovod|^Nccl")
_TASK = re.compile(r"/job:(\w+)(?:/replica:\d+)?(?:/task:(\d+))?")  # group 1 the job, 2 the task


def graphs(concrete_functions: Iterable) -> List:
    """The functions' graphs and every graph nested in them (cond branches, loop bodies, calls)."""
    todo, seen = [f.graph for f in concrete_functions], []
    while todo:
        graph = todo.pop()
        if any(graph is g for g in seen):
            continue
        seen.append(graph)
        todo += [f.graph for f in getattr(graph, "_functions", {}).values() if hasattr(f, "graph")]
    return seen


def _job_of(device: str) -> str:
    """The job a device string names ("unplaced" for none)."""
    found = _TASK.search(device or "")
    return found.group(1) if found else "unplaced"


def _resource_job(tensor) -> str:
    """The job of the variable a resource tensor is the handle of (a resource op runs where its resource
    lives, whatever device it asked for): followed through each graph's captures to the handle itself."""
    while True:
        outer = next((external for external, internal in tensor.graph.captures if internal is tensor), None)
        if outer is None:
            return _job_of(tensor.op.device)
        if not hasattr(outer, "graph"):  # the variable's own (eager) handle
            return _job_of(getattr(outer, "device", ""))
        tensor = outer


def _job(op) -> str:
    if _TASK.search(op.device or ""):
        return _job_of(op.device)
    resource = next((t for t in op.inputs if t.dtype.name == "resource"), None)
    return _resource_job(resource) if resource is not None else "unplaced"


def _task(op):
    """(job, task) an op was asked to run on, None if it was not placed by name."""
    task = _TASK.search(op.device or "")
    return (task.group(1), task.group(2) or "0") if task else None


def _shape(tensor):
    try:
        return tuple(tensor.shape.as_list())
    except ValueError:  # unknown rank
        return None


def _collectives_before(graph) -> Dict:
    """{op: the collective op types among its ancestors (inputs and control inputs)} of one graph,
    in one pass: a graph's ops are created after their inputs."""
    before: Dict = {}
    for op in graph.get_operations():
        found = set()
        for parent in [t.op for t in op.inputs] + list(op.control_inputs):
            found |= before.get(parent, frozenset())
            if _COLLECTIVE.search(parent.type):
                found.add(parent.type)
        before[op] = frozenset(found)
    return before


def summary(concrete_functions: Iterable, tables: Iterable) -> Dict:
    """{row_ops: {"OpType@job": count}, crossings: {"job->job": tensors sent to a task of the other job},
    sent_after: {"job->job": {collective OpType: how many of those tensors are made after one}},
    collectives: {OpType: [input shapes]}, table_sized: {OpType: count}} over every graph of
    `concrete_functions`; `tables`: the embedding tables' variables (or shards), whose full shapes no
    float tensor of a step that costs the rows it touches has."""
    sizes = {tuple(t.shape.as_list()) for t in tables}
    row_ops, collectives, table_sized = collections.Counter(), collections.defaultdict(list), collections.Counter()
    crossed = {}  # (tensor, its job, the task it goes to): each is sent once, whatever reads it there
    for graph in graphs(concrete_functions):
        before = _collectives_before(graph)
        for op in graph.get_operations():
            if _ROW_OPS.search(op.type):
                row_ops[f"{op.type}@{_job(op)}"] += 1
            to = _task(op)
            for t in op.inputs if to else ():
                source = _task(t.op)
                if source and source[0] != to[0] and t.dtype.name != "resource":
                    crossed[(id(graph), t.name, source[0], to)] = before[t.op] | (
                        {t.op.type} if _COLLECTIVE.search(t.op.type) else set())
            if _COLLECTIVE.search(op.type):
                collectives[op.type].append([list(s) if s is not None else None
                                             for s in (_shape(t) for t in op.inputs if t.dtype.is_floating)])
            if any(t.dtype.is_floating and _shape(t) in sizes for t in op.outputs):
                table_sized[op.type] += 1
    crossings = collections.Counter(f"{source}->{to[0]}" for _, _, source, to in crossed)
    sent_after: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for (_, _, source, to), before in crossed.items():
        sent_after[f"{source}->{to[0]}"].update(before)
    return {"row_ops": dict(sorted(row_ops.items())), "crossings": dict(sorted(crossings.items())),
            "sent_after": {k: dict(sorted(v.items())) for k, v in sorted(sent_after.items())},
            "collectives": dict(sorted(collectives.items())),
            "table_sized": dict(sorted(table_sized.items())), "table_shapes": sorted(list(s) for s in sizes)}
