"""Where a strategy's communication time goes: how many messages a step sends, how large, and
the bandwidth they achieved (bus bandwidth as nccl-tests defines it for all-reduce).

A task counts its messages from its own gradients and knobs (plan_*); the cluster record divides
the bytes by the step split's measured communication time (achieved). Counts follow each
library's own rule, so the record says which rule gave them:
- MultiWorkerMirrored: TensorFlow's cross_device_utils.group_by_size over the gradients in
  reverse (backprop) order, as CollectiveAllReduce packs them: with bytes_per_pack = 0 one pack
  holds every gradient; otherwise a new pack starts once the last one exceeds bytes_per_pack.
  One all-reduce per pack (exact: the same rule TensorFlow runs).
- Horovod: tensor fusion fills a buffer of at most the fusion threshold with the tensors ready
  in one cycle; how many are ready together depends on timing, so the count given is the
  fewest buffers the gradients fit in (a lower bound), and the tensors per step are exact.
- Parameter servers: each worker pulls every variable shard and pushes a gradient for each
  (2 x shards messages, |w| each way), the shards as the live variables were placed.
algbw = bytes all-reduced per step / communication time; busbw = algbw x 2(N-1)/N (nccl-tests'
all-reduce bus bandwidth: what each rank's link carried, comparable across N).
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence

MB = 1e6


def tf_packs(sizes: Sequence[int], bytes_per_pack: int) -> List[int]:
    """Bytes of each all-reduce MultiWorkerMirrored runs for gradients of `sizes` (variable order)."""
    ordered = list(reversed([int(s) for s in sizes]))
    if not ordered:
        return []
    if bytes_per_pack == 0:
        return [sum(ordered)]
    packs: List[int] = []
    for size in ordered:
        if not packs or packs[-1] > bytes_per_pack:
            packs.append(0)
        packs[-1] += size
    return packs


def fused_buffers(sizes: Sequence[int], threshold_bytes: int) -> List[int]:
    """The fewest fusion buffers of at most `threshold_bytes` the gradients fit in, in backprop
    order (a tensor larger than the buffer goes alone; threshold 0: no fusion, one per tensor)."""
    buffers: List[int] = []
    for size in reversed([int(s) for s in sizes]):
        if threshold_bytes > 0 and buffers and buffers[-1] + size <= threshold_bytes:
            buffers[-1] += size
        else:
            buffers.append(size)
    return buffers


def _plan(kind: str, rule: str, messages: List[int], tensors: int, exact: bool) -> dict:
    return {"kind": kind, "rule": rule, "messages_per_step": len(messages), "exact": exact,
            "bytes_per_step": int(sum(messages)), "tensors_per_step": tensors,
            "message_mb": {"min": min(messages) / MB, "median": statistics.median(messages) / MB,
                           "max": max(messages) / MB} if messages else {}}


def plan_all_reduce(sizes: Sequence[int], bytes_per_pack: int) -> dict:
    return _plan("all-reduce", f"TensorFlow's packs of >= {bytes_per_pack} bytes" if bytes_per_pack
                 else "TensorFlow's default: one pack", tf_packs(sizes, bytes_per_pack), len(sizes), True)


HOROVOD_DEFAULT_FUSION_MB = 128  # Horovod 0.28's HOROVOD_FUSION_THRESHOLD when unset


def plan_horovod(sizes: Sequence[int], fusion_threshold_mb: int, wire_bytes_per_value: float = 1.0) -> dict:
    """`wire_bytes_per_value`: the compressed share of each gradient's bytes (fp16/bf16 of fp32: 0.5)."""
    mb = HOROVOD_DEFAULT_FUSION_MB if fusion_threshold_mb < 0 else fusion_threshold_mb
    wire = [int(s * wire_bytes_per_value) for s in sizes]
    return _plan("all-reduce", f"Horovod tensor fusion, {mb} MiB buffers: at least this many",
                 fused_buffers(wire, mb << 20), len(sizes), False)


def plan_parameter_server(shard_bytes: Sequence[int]) -> dict:
    """One worker's pulls and pushes per update: every variable shard each way."""
    messages = [int(b) for b in shard_bytes] * 2
    return _plan("pull and push", "every variable shard pulled, its gradient pushed", messages,
                 len(shard_bytes), True)


def achieved(plan: Optional[dict], communication_s: float, workers: int) -> Optional[dict]:
    """The plan with its bandwidth over the measured communication time per global step."""
    if not plan or not communication_s or communication_s <= 0:
        return plan
    out = dict(plan, communication_ms=communication_s * 1e3, workers=workers)
    algbw = plan["bytes_per_step"] * 8 / communication_s / 1e9
    out["algbw_gbit_s"] = algbw
    if plan["kind"] == "all-reduce":
        out["busbw_gbit_s"] = algbw * 2 * (workers - 1) / workers if workers > 1 else 0.0
    return out


def of_run(task_records: Sequence[dict], breakdown: Optional[dict]) -> Optional[dict]:
    """The cluster record's communication: the first worker's plan, over the mean communication."""
    plans = [r["comm_plan"] for r in task_records if r.get("kind") == "task" and r.get("comm_plan")]
    if not plans:
        return None
    workers = sum(1 for r in task_records if r.get("kind") == "task" and r.get("role") == "worker")
    mean = ((breakdown or {}).get("mean_s") or {}).get("communication", 0.0)
    return achieved(plans[0], mean, max(1, workers))


def line(comm: Optional[Dict]) -> Optional[str]:
    """The run table's line."""
    if not comm:
        return None
    size = comm.get("message_mb") or {}
    text = (f"communication per step: {comm['messages_per_step']} {comm['kind']} message(s) "
            f"({'exact' if comm['exact'] else 'at least'}; {comm['rule']}) of {size.get('median', 0):.2f} MB median "
            f"({size.get('min', 0):.2f}-{size.get('max', 0):.2f}), {comm['bytes_per_step'] / MB:.1f} MB")
    if "algbw_gbit_s" in comm:
        text += f" in {comm['communication_ms']:.1f} ms: algbw {comm['algbw_gbit_s']:.2f} Gbit/s"
        if "busbw_gbit_s" in comm:
            text += f", busbw {comm['busbw_gbit_s']:.2f} Gbit/s (nccl-tests: algbw x 2(N-1)/N)"
    return text
