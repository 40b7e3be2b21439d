"""
Moved to :mod:`haystack_mvr.readers.training.budget_callback` (the readers' wing); re-exported here so that older
imports keep working.
"""

from haystack_mvr.readers.training.budget_callback import WallClockBudgetCallback

__all__ = ["WallClockBudgetCallback"]
