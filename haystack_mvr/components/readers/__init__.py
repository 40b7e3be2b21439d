from haystack_mvr.components.readers.fusion_in_decoder_reader import FusionInDecoderReader
from haystack_mvr.components.readers.generative import generative_prompt_builder, generative_reader_pipeline

__all__ = ["FusionInDecoderReader", "generative_prompt_builder", "generative_reader_pipeline"]
