"""
Moved to :mod:`haystack_mvr.readers.training.extractive` (the readers' wing); re-exported here so that older
imports keep working.
"""

from haystack_mvr.readers.training.extractive import extractive_features, train_extractive_reader, training_questions

__all__ = ["extractive_features", "train_extractive_reader", "training_questions"]
