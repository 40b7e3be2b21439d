"""
Moved to :mod:`haystack_mvr.readers.training.retrieved_passages` (the readers' wing); re-exported here so that older
imports keep working.
"""

from haystack_mvr.readers.training.retrieved_passages import (
    bm25_top_passages,
    passages_with_gold,
    read_retrieved,
    training_passages,
    write_retrieved,
)

__all__ = ["bm25_top_passages", "passages_with_gold", "read_retrieved", "training_passages", "write_retrieved"]
