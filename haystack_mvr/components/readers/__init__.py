from haystack_mvr.components.readers.fusion_in_decoder_reader import FusionInDecoderReader
from haystack_mvr.components.readers.generative import generative_prompt_builder, generative_reader_pipeline
from haystack_mvr.readers.generative_reader import GenerativeReader

__all__ = ["FusionInDecoderReader", "GenerativeReader", "generative_prompt_builder", "generative_reader_pipeline"]
