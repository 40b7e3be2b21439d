"""
The readers as Haystack components. They live in the readers' wing, ``haystack_mvr.readers``; this package is where
pipelines import them from.
"""

from haystack_mvr.readers.fusion_in_decoder_reader import FusionInDecoderReader
from haystack_mvr.readers.generative_pipeline import generative_prompt_builder, generative_reader_pipeline
from haystack_mvr.readers.generative_reader import GenerativeReader

__all__ = ["FusionInDecoderReader", "GenerativeReader", "generative_prompt_builder", "generative_reader_pipeline"]
