"""torch.distributed helpers: process-group setup from torchrun's environment, gradient-preserving gathers."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands: ``rank`` of ``world_size`` processes, ``local_rank`` on its node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    initialized_here: bool = False

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed() -> DistributedContext:
    """
    Join the process group when launched by ``torchrun`` (``WORLD_SIZE > 1``): NCCL with CUDA, gloo on CPU.

    A group that is already initialised (e.g. by the caller) is used as it is.
    """
    if dist.is_available() and dist.is_initialized():
        return DistributedContext(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistributedContext()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend=backend)
    return DistributedContext(dist.get_rank(), dist.get_world_size(), local_rank, initialized_here=True)


class _GatherWithGrad(torch.autograd.Function):
    """``all_gather`` along dimension 0 whose backward hands each process the summed gradient of its own rows."""

    @staticmethod
    def forward(ctx, tensor: Tensor) -> Tensor:
        ctx.rows = tensor.shape[0]
        parts = [torch.empty_like(tensor, memory_format=torch.contiguous_format) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, tensor.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        # Every process holds a gradient for all gathered rows (from its own queries); the sum over processes is
        # the gradient of the summed losses. The buffer must be contiguous: collectives read raw memory.
        grad = grad.contiguous()
        dist.all_reduce(grad)
        start = dist.get_rank() * ctx.rows
        return grad[start : start + ctx.rows]


def gather_with_grad(tensor: Tensor) -> Tensor:
    """
    All processes' ``tensor`` (same shape everywhere) concatenated along dimension 0; gradients flow back.

    Written out rather than ``torch.distributed.nn.functional.all_gather`` (deprecated), whose gloo backward
    passes non-contiguous gradients (e.g. from ``einsum``) to ``all_to_all`` and scrambles them.
    """
    return _GatherWithGrad.apply(tensor)


def gather_no_grad(tensor: Tensor) -> list[Tensor]:
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return parts


def pad_rows(tensor: Tensor, rows: int, value: float | bool | int = 0) -> Tensor:
    """Pad dimension 0 of ``tensor`` to ``rows`` with ``value``."""
    missing = rows - tensor.shape[0]
    if missing <= 0:
        return tensor
    pad = torch.full((missing, *tensor.shape[1:]), value, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([tensor, pad])


def max_over_processes(value: int, device: torch.device) -> int:
    t = torch.tensor([value], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def mean_over_processes(values: Tensor) -> Tensor:
    values = values.clone()
    dist.all_reduce(values)
    return values / dist.get_world_size()
