"""
Moved to :mod:`haystack_mvr.readers.training.arguments` (the readers' wing); re-exported here so that older
imports keep working.
"""

from haystack_mvr.readers.training.arguments import (
    CROSS_ATTENTION_INITS,
    DEFAULTS,
    GENERATIVE_BASE,
    GENERATIVE_DEFAULTS,
    KINDS,
    ReaderTrainingArguments,
)

__all__ = [
    "CROSS_ATTENTION_INITS",
    "DEFAULTS",
    "GENERATIVE_BASE",
    "GENERATIVE_DEFAULTS",
    "KINDS",
    "ReaderTrainingArguments",
]
