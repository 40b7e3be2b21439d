"""
Moved to :mod:`haystack_mvr.readers.generative_pipeline` (the readers' wing); this module re-exports it so that older
imports keep working.
"""

from haystack_mvr.readers.generative_pipeline import generative_prompt_builder, generative_reader_pipeline

__all__ = ["generative_prompt_builder", "generative_reader_pipeline"]
