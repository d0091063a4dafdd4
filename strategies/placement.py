"""Where things actually ran: the report every task records of its placement.

hard: every op runs under an explicit device scope with soft placement off, so an impossible
placement fails loudly. soft: the same scopes, but TensorFlow may move ops (e.g. to the CPU when
no GPU exists); the report then shows what moved. The devices themselves (which a task sees, its
threads, its compute device) are set up by strategies.devices.
"""
from __future__ import annotations

import collections
import re
from typing import Callable, Dict, Optional

from strategies import devices

_DEVICE = re.compile(r"device:([A-Z]+):(\d+)", re.IGNORECASE)


def short_device(name: str) -> str:
    """'/job:ps/replica:0/task:1/device:CPU:0' -> 'ps:1/CPU:0'; '' -> 'unplaced'."""
    if not name:
        return "unplaced"
    m = _DEVICE.search(name)
    dev = f"{m.group(1).upper()}:{m.group(2)}" if m else name
    job = re.search(r"/job:([^/]+)", name)
    task = re.search(r"/task:(\d+)", name)
    if not job or job.group(1) == "localhost":
        return dev
    return f"{job.group(1)}:{task.group(1) if task else 0}/{dev}"


def capture_op_devices(run_step: Callable[[], object]) -> Dict[str, int]:
    """Runs one step with run metadata on and counts the executed graph's ops per device.

    The partition graphs are what the placer decided (after soft placement moved anything),
    not what the code requested. Empty when the step ran remotely (parameter servers).
    """
    from tfbench.framework.tf_import import eager_context as context

    context.enable_run_metadata()
    try:
        run_step()
        metadata = context.export_run_metadata()
    finally:
        context.disable_run_metadata()
    counts: Dict[str, int] = collections.Counter()
    graphs = [pg for fg in metadata.function_graphs for pg in fg.partition_graphs] or list(metadata.partition_graphs)
    for graph in graphs:
        for node in graph.node:
            counts[short_device(node.device)] += 1
    return dict(counts)


WITH_VARIABLE = "with its variable"
# Function inputs and the function's own bookkeeping are created outside the step's body.
_BOUNDARY_OPS = {"Placeholder", "_Arg", "_Retval", "NoOp", "Identity"}


def requested_op_devices(concrete_function) -> Dict[str, int]:
    """Ops of the step's body per requested device in its function graph, nested functions
    (tf.cond branches, while bodies) included: what the code pinned, not where ops ran."""
    counts: Dict[str, int] = collections.Counter()
    graphs = [concrete_function.graph]
    while graphs:
        graph = graphs.pop()
        for op in graph.get_operations():
            if op.type in _BOUNDARY_OPS:
                continue
            if not op.device and any(t.dtype.name == "resource" for t in op.inputs):
                counts[WITH_VARIABLE] += 1  # TensorFlow runs ops on a resource where it lives
            else:
                counts[short_device(op.device)] += 1
        graphs += [f.graph for f in getattr(graph, "_functions", {}).values() if hasattr(f, "graph")]
    return dict(counts)


def line_buffered_c_stdout() -> None:
    """TensorFlow's placer prints with C stdio, block-buffered into a task's log file: line
    buffering lets another task read the placement while this one still runs."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.setvbuf(ctypes.c_void_p.in_dll(libc, "stdout"), None, 1, 0)  # 1 = _IOLBF
    except (OSError, ValueError, AttributeError):
        pass


def flush_c_stdout() -> None:
    import ctypes

    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


_PLACER_LINE = re.compile(r"^(\S+): \((\w+)\): (/job:\S+)$")


def placer_log_devices(log_path: str) -> Dict[str, int]:
    """Ops per device as a task's runtime placed them, from the lines its placer prints with
    log_device_placement on ("name: (OpType): /job:worker/replica:0/task:0/device:CPU:0"): the
    evidence for tasks whose steps run remotely, where run metadata cannot see. Empty when the
    log is not on this machine."""
    counts: Dict[str, int] = collections.Counter()
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = _PLACER_LINE.match(line.strip())
                if m and m.group(2) not in _BOUNDARY_OPS:
                    counts[short_device(m.group(3))] += 1
    except OSError:
        return {}
    return dict(counts)


_COLLECTIVE = re.compile(r"Collective|AllReduce|Allreduce|Allgather|Broadcast", re.IGNORECASE)


def collective_ops(concrete_function) -> int:
    """Cross-replica communication ops in a step's function graph (nested graphs included):
    a forward step must have none, for every strategy alike."""
    count, graphs = 0, [concrete_function.graph]
    while graphs:
        graph = graphs.pop()
        count += sum(1 for op in graph.get_operations() if _COLLECTIVE.search(op.type))
        graphs += [f.graph for f in getattr(graph, "_functions", {}).values() if hasattr(f, "graph")]
    return count


def variable_devices(variables) -> Dict[str, int]:
    counts: Dict[str, int] = collections.Counter()
    for v in variables:
        for component in getattr(v, "values", None) or getattr(v, "variables", None) or [v]:
            counts[short_device(getattr(component, "device", ""))] += 1
    return dict(counts)


def report(config, device: str, op_devices: Dict[str, int], var_devices: Dict[str, int],
           source: str, note: Optional[str] = None) -> dict:
    """What the task records about placement, so comparisons can show what soft placement did."""
    used = {d.split("/")[-1].split(":")[0] for d in op_devices if d != "unplaced"}
    fallback = config.device == "gpu" and "GPU" not in used and bool(op_devices)
    visible = len(devices.gpus())
    out = {
        "placement": config.placement,
        "requested_device": config.device,
        "device_scope": device,
        "gpus_visible": visible,
        # with no GPU every op can only run on the CPU: hard and soft placement cannot differ
        "hard_and_soft_can_differ": visible > 0,
        "op_devices": op_devices,
        "op_devices_source": source,
        "variable_devices": var_devices,
        "fallback_to_cpu": fallback,
    }
    notes = [note] if note else []
    if not visible:
        notes.append(CPU_ONLY_NOTE)
    if notes:
        out["note"] = "; ".join(notes)
    return out


CPU_ONLY_NOTE = ("CPU-only: no GPU visible, so every op runs on the CPU and hard and soft placement "
                 "cannot differ")


class PlacementProbe:
    """Runs the first warm-up step with run metadata on and keeps the op counts it saw."""

    def __init__(self):
        self.op_devices: Dict[str, int] = {}
        self.probed = False

    def __call__(self, step: Callable[[], object]) -> None:
        self.op_devices = capture_op_devices(step)
        self.probed = True

    def report(self, config, device: str, variables) -> dict:
        note = None if self.probed else "no warm-up step to probe placement on"
        return report(config, device, self.op_devices, variable_devices(variables),
                      "run_metadata" if self.probed else "none", note)
