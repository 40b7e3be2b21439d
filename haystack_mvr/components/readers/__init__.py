from haystack_mvr.components.readers.fusion_in_decoder_reader import FusionInDecoderReader

__all__ = ["FusionInDecoderReader"]
