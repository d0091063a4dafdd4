"""--precision: fp32, bf16 or fp16 through Keras mixed precision, only where the device can.

bf16 runs on CPUs with BF16 instructions (avx512_bf16 or amx_bf16 in /proc/cpuinfo) and on
GPUs; fp16 runs on GPUs only, with dynamic loss scaling so that small gradients do not flush to
zero. Elsewhere the run is refused with one line: an emulated bf16 on a CPU without the
instructions would measure the emulation, not the precision. Variables stay fp32 (mixed
precision); logits are cast to fp32 before the loss.
"""
from __future__ import annotations

from typing import Iterable, Optional

PRECISIONS = ("fp32", "bf16", "fp16")
POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset:
    """The CPU's feature flags (the first 'flags' line of /proc/cpuinfo); empty if unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_bf16(flags: Optional[Iterable[str]] = None) -> bool:
    flags = cpu_flags() if flags is None else set(flags)
    return any(f in flags for f in BF16_CPU_FLAGS)


def unsupported(precision: str, on_gpu: bool, flags: Optional[Iterable[str]] = None) -> Optional[str]:
    """One line saying why `precision` cannot run on the compute device, or None.

    `on_gpu`: the steps run on a GPU (--device=gpu and one exists); `flags`: the CPU's feature
    flags (read from /proc/cpuinfo when None).
    """
    if precision not in PRECISIONS:
        return f"--precision={precision!r} is unknown; choose one of {', '.join(PRECISIONS)}"
    if precision == "fp16" and not on_gpu:
        return ("--precision=fp16 needs --device=gpu and a GPU; CPUs have no fast fp16 "
                "arithmetic (use bf16 on CPUs with BF16 instructions)")
    if precision == "bf16" and not on_gpu and not cpu_has_bf16(flags):
        return ("--precision=bf16 needs a CPU with BF16 instructions (avx512_bf16 or amx_bf16), "
                "and this CPU has neither; bf16 would only be emulated")
    return None


def apply_policy(precision: str) -> None:
    """Sets the Keras global policy; call before the model is built."""
    from tfbench.framework.tf_import import keras

    keras.mixed_precision.set_global_policy(POLICIES[precision])


def wrap_optimizer(optimizer, precision: str):
    """fp16: dynamic loss scaling; fp32 and bf16 (fp32's exponent range) need none."""
    if precision != "fp16":
        return optimizer
    from tfbench.framework.tf_import import keras

    return keras.mixed_precision.LossScaleOptimizer(optimizer)


def scale_loss(optimizer, loss):
    """The loss to differentiate: scaled up when the optimizer does loss scaling."""
    return optimizer.get_scaled_loss(loss) if _scales(optimizer) else loss


def unscale_gradients(optimizer, grads):
    return optimizer.get_unscaled_gradients(grads) if _scales(optimizer) else grads


def _scales(optimizer) -> bool:
    return optimizer is not None and hasattr(optimizer, "get_scaled_loss")
