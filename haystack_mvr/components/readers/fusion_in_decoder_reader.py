"""
Moved to :mod:`haystack_mvr.readers.fusion_in_decoder_reader` (the readers' wing); this module re-exports it.

Pipelines saved before the move name ``haystack_mvr.components.readers.fusion_in_decoder_reader.FusionInDecoderReader``:
Haystack imports this module to resolve that type, so it registers the class under the old name too, and the
class's ``from_dict`` accepts it. New dumps name the class's own module.
"""

from haystack import component

from haystack_mvr.readers.fusion_in_decoder_reader import LEGACY_TYPES, FusionInDecoderReader

for _legacy in LEGACY_TYPES:
    component.registry.setdefault(_legacy, FusionInDecoderReader)

__all__ = ["FusionInDecoderReader"]
