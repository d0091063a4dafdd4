"""GPU utilisation and memory through NVML, when the library and a GPU are there.

pynvml (package nvidia-ml-py) is imported only here and only when a monitor starts, so
CPU-only machines need neither the package nor a driver: GpuSampler.create() returns None.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Dict, List, Optional

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class GpuDevice:
    index: int
    util_percent: float
    mem_used_bytes: int


@dataclasses.dataclass(frozen=True)
class GpuSample:
    devices: List[GpuDevice]
    process_mem_bytes: Dict[int, int]  # pid -> GPU memory it holds, summed over devices


class GpuSampler:
    def __init__(self, nvml, handles):
        self._nvml = nvml
        self._handles = handles

    @classmethod
    def create(cls) -> Optional["GpuSampler"]:
        try:
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
        except Exception:  # NVMLError subclasses: no driver, no library, no permission
            return None
        try:
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as e:
            log.warning("NVML found no usable GPU: %s", e)
            handles = []
        if not handles:
            pynvml.nvmlShutdown()
            return None
        return cls(pynvml, handles)

    def sample(self) -> GpuSample:
        nvml = self._nvml
        devices, process_mem = [], {}
        for index, handle in enumerate(self._handles):
            try:
                util = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
                used = nvml.nvmlDeviceGetMemoryInfo(handle).used
                procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except Exception as e:
                log.debug("NVML sample of GPU %d failed: %s", index, e)
                continue
            devices.append(GpuDevice(index=index, util_percent=float(util), mem_used_bytes=int(used)))
            for proc in procs:
                process_mem[proc.pid] = process_mem.get(proc.pid, 0) + int(proc.usedGpuMemory or 0)
        return GpuSample(devices=devices, process_mem_bytes=process_mem)

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass
