from haystack_mvr.components.builders.multi_view_context_builder import (
    PIECE_TOKENS_KEY,
    SOURCE_ID_KEY,
    SOURCE_SPAN_KEY,
    MultiViewContextBuilder,
)

__all__ = ["PIECE_TOKENS_KEY", "SOURCE_ID_KEY", "SOURCE_SPAN_KEY", "MultiViewContextBuilder"]
