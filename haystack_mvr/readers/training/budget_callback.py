"""A ``TrainerCallback`` that ends training after a wall-clock budget (for CPU runs on a shared machine)."""

from __future__ import annotations

import time

from transformers import TrainerCallback

__all__ = ["WallClockBudgetCallback"]


class WallClockBudgetCallback(TrainerCallback):
    """
    Stops the Trainer at the first step end after ``minutes`` of training; the model is then saved as usual.

    :param minutes: The budget, counted from ``on_train_begin``.
    """

    def __init__(self, minutes: float) -> None:
        if minutes <= 0:
            msg = f"minutes must be positive, got {minutes!r}."
            raise ValueError(msg)
        self.minutes = minutes
        self.started: float | None = None
        self.stopped_early = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self.started is not None and time.perf_counter() - self.started > 60 * self.minutes:
            control.should_training_stop = True
            self.stopped_early = True
        return control
