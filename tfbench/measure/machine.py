"""Which machine a measurement belongs to: its CPU model, CPUs, GPUs and TensorFlow.

A measured peak and a saved tuning hold only on the machine they were measured on (the best
knob of a 2-core box is not that of a 16-core one), so both are stored under this machine's key
and read back only under the same key. Everything here is read without starting TensorFlow.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from typing import Dict, List, Optional

from tfbench.framework import distribution


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def gpus() -> List[str]:
    """GPU lines of `nvidia-smi -L`, without starting TensorFlow; [] when there are none."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def accelerator(gpu_lines: List[str]) -> str:
    """'no GPU', or the GPUs by model ('2x NVIDIA A100-SXM4-40GB'), without their serial UUIDs."""
    names: Dict[str, int] = {}
    for line in gpu_lines:  # "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-...)"
        name = line.split(":", 1)[-1].split(" (UUID")[0].strip()
        names[name] = names.get(name, 0) + 1
    return ", ".join(f"{n}x {name}" for name, n in sorted(names.items())) or "no GPU"


def identity(gpu_lines: Optional[List[str]] = None) -> Dict[str, str]:
    """{'cpu', 'cpus', 'accelerator', 'tensorflow'} of this machine."""
    return {"cpu": cpu_model(), "cpus": str(os.cpu_count()),
            "accelerator": accelerator(gpus() if gpu_lines is None else gpu_lines),
            "tensorflow": distribution.tensorflow_version()}


def key(ident: Optional[Dict[str, str]] = None) -> str:
    """E.g. 'Intel(R) Xeon(R) Processor | 2 cpus | no GPU | tensorflow 2.21.0'."""
    ident = ident or identity()
    return f"{ident['cpu']} | {ident['cpus']} cpus | {ident['accelerator']} | tensorflow {ident['tensorflow']}"
