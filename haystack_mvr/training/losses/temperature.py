"""The annealed temperature of MVR (Eq. 8), shared by the global and the local loss."""

from __future__ import annotations

import math


def annealed_temperature(epoch: float, alpha: float = 0.1, minimum: float = 0.3, *, per_epoch: bool = True) -> float:
    """
    MVR Eq. 8: ``tau = max(minimum, exp(-alpha * t))`` with ``t`` the training epoch.

    The paper says "t denotes the training epochs, and the temperature updates every epoch", so by default ``t``
    is the number of *completed* epochs, ``floor(epoch)``: the whole first epoch trains at ``tau = 1``, the
    second at ``exp(-alpha)``, and with ``alpha = 0.1`` the floor ``0.3`` is reached after 13 epochs.
    ``per_epoch=False`` anneals smoothly with the fractional epoch instead (not in the paper).

    :param epoch: Training progress in epochs, ``0.0`` at the start (``2.5`` is halfway through the third epoch).
    :param alpha: Annealing speed ``alpha`` (the paper's best: 0.1; it also tries 0.3 and 0.03).
    :param minimum: The floor of the temperature (0.3 in the paper).
    :param per_epoch: Step once per epoch as in the paper (``True``) or anneal continuously (``False``).
    :returns: The temperature ``tau > 0``.

    Example:
        >>> annealed_temperature(0.9)
        1.0
        >>> round(annealed_temperature(1.2), 4)
        0.9048
    """
    if epoch < 0:
        msg = f"epoch must be non-negative, got {epoch}."
        raise ValueError(msg)
    if alpha < 0:
        msg = f"alpha must be non-negative, got {alpha}."
        raise ValueError(msg)
    if minimum <= 0:
        msg = f"minimum must be positive (it divides the scores), got {minimum}."
        raise ValueError(msg)
    t = math.floor(epoch) if per_epoch else epoch
    return max(minimum, math.exp(-alpha * t))
