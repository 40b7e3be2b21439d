"""What a multi-view loss returns besides the scalar: its parts, for logging."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class LossOutput:
    """
    A loss and its parts.

    :param loss: The scalar to minimise (``global_loss + lambda_local * local_loss``).
    :param global_loss: The contrastive part, a detached scalar.
    :param local_loss: The local uniformity part (before ``lambda_local``), a detached scalar.
    :param winning_view: ``(B,)`` long, detached: for each query, the view of its positive document that has
        the highest score ``argmax_i f_i(q, d+)`` (padding views never win).
    """

    loss: Tensor
    global_loss: Tensor
    local_loss: Tensor
    winning_view: Tensor
