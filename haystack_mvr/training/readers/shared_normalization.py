"""
Moved to :mod:`haystack_mvr.readers.training.shared_normalization` (the readers' wing); re-exported here so that older
imports keep working.
"""

from haystack_mvr.readers.training.shared_normalization import (
    SharedNormalizationCollator,
    SharedNormalizationTrainer,
    shared_normalization_examples,
    shared_normalization_loss,
)

__all__ = [
    "SharedNormalizationCollator",
    "SharedNormalizationTrainer",
    "shared_normalization_examples",
    "shared_normalization_loss",
]
