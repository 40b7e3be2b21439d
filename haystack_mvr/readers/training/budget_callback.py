"""``TrainerCallback``s on the wall clock (for CPU runs on a shared machine): one ends training after a budget, one
saves a checkpoint every so many minutes."""

from __future__ import annotations

import time

from transformers import TrainerCallback

__all__ = ["WallClockBudgetCallback", "WallClockSaveCallback"]


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


class WallClockSaveCallback(TrainerCallback):
    """
    Asks the Trainer for a checkpoint at the first step end after each ``minutes`` of training.

    :param minutes: The interval, counted from ``on_train_begin`` and then from each checkpoint it asked for.
    """

    def __init__(self, minutes: float) -> None:
        if minutes <= 0:
            msg = f"minutes must be positive, got {minutes!r}."
            raise ValueError(msg)
        self.minutes = minutes
        self.last: float | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self.last is not None and time.perf_counter() - self.last >= 60 * self.minutes:
            control.should_save = True
            self.last = time.perf_counter()
        return control
