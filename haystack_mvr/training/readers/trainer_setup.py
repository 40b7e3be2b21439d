"""
Moved to :mod:`haystack_mvr.readers.training.trainer_setup` (the readers' wing); re-exported here so that older
imports keep working.
"""

from haystack_mvr.readers.training.trainer_setup import train_and_save, trainer_settings

__all__ = ["train_and_save", "trainer_settings"]
