"""
Moved to :mod:`haystack_mvr.readers.generative_prompt` (the readers' wing); this module re-exports it so that older
imports keep working.
"""

from haystack_mvr.readers.generative_prompt import (
    ANSWER_PATTERN,
    GENERATIVE_READER_TEMPLATE,
    reader_messages,
    reader_prompt,
)

__all__ = ["ANSWER_PATTERN", "GENERATIVE_READER_TEMPLATE", "reader_messages", "reader_prompt"]
