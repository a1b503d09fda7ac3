"""Trace rows and pods for the bench.trace tests: the CSV headers of the Alibaba files, a file
writer and a TracePod builder with the defaults the tests share."""

from __future__ import annotations

from pathlib import Path

from bench.trace_workload import TracePod

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def pod(name: str, num_gpu: int = 1, gpu_milli: int = 1000, spec: tuple[str, ...] = (),
        cpu: int = 1000, memory: int = 1024) -> TracePod:
    return TracePod(name, cpu, memory, num_gpu, gpu_milli if num_gpu else 0, spec)
