"""Multi-view encoders (torch + transformers only; never imports haystack)."""

from haystack_mvr.modeling.config import MultiViewConfig
from haystack_mvr.modeling.encoder import EncodedDocument, MultiViewEncoder
from haystack_mvr.modeling.inputs import EncoderInputs
from haystack_mvr.modeling.loading import LoadOptions, ModelNotFoundError
from haystack_mvr.modeling.scoring import max_over_views, view_scores
from haystack_mvr.modeling.snippets import split_into_snippets, view_for_offset

__all__ = [
    "EncodedDocument",
    "EncoderInputs",
    "LoadOptions",
    "ModelNotFoundError",
    "MultiViewConfig",
    "MultiViewEncoder",
    "max_over_views",
    "split_into_snippets",
    "view_for_offset",
    "view_scores",
]
