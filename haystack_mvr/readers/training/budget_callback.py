"""``TrainerCallback``s on the wall clock (for CPU runs on a shared machine): one ends training after a budget, one
saves a checkpoint every so many minutes."""

from __future__ import annotations

import time

from transformers import TrainerCallback

__all__ = ["WallClockBudgetCallback", "WallClockSaveCallback"]


class _WallClockCallback(TrainerCallback):
    """A callback on ``minutes`` of the wall clock, counted from ``on_train_begin`` (``self.since``)."""

    def __init__(self, minutes: float) -> None:
        if minutes <= 0:
            msg = f"minutes must be positive, got {minutes!r}."
            raise ValueError(msg)
        self.minutes = minutes
        self.since: float | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.since = time.perf_counter()

    def _due(self) -> bool:
        return self.since is not None and time.perf_counter() - self.since >= 60 * self.minutes


class WallClockBudgetCallback(_WallClockCallback):
    """
    Stops the Trainer at the first step end after ``minutes`` of training; the model is then saved as usual.

    :param minutes: The budget, counted from ``on_train_begin``.
    """

    def __init__(self, minutes: float) -> None:
        super().__init__(minutes)
        self.stopped_early = False

    def on_step_end(self, args, state, control, **kwargs):
        if self._due():
            control.should_training_stop = True
            self.stopped_early = True
        return control


class WallClockSaveCallback(_WallClockCallback):
    """
    Asks the Trainer for a checkpoint at the first step end after each ``minutes`` of training.

    :param minutes: The interval, counted from ``on_train_begin`` and then from each checkpoint it asked for.
    """

    def on_step_end(self, args, state, control, **kwargs):
        if self._due():
            control.should_save = True
            self.since = time.perf_counter()
        return control
