"""Timing for the speed benchmarks: one call, synchronised on a GPU, and versions timed in alternation."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def timed(fn: Callable[[], object], device: str) -> float:
    """Seconds one call of ``fn`` takes, waiting for the GPU's queued work before and after on a CUDA device."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def alternate(
    variants: dict[str, Callable[[], object]], repeats: int, device: str, warmup: int = 1
) -> dict[str, list[float]]:
    """Each variant's seconds over ``repeats`` rounds, the variants in turn within a round, after ``warmup`` rounds."""
    for _ in range(warmup):
        for fn in variants.values():
            timed(fn, device)
    runs: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            runs[name].append(timed(fn, device))
    return runs
