from haystack_mvr.components.builders.multi_view_context_builder import MultiViewContextBuilder
from haystack_mvr.views import PIECE_TOKENS_KEY, SOURCE_ID_KEY, SOURCE_SPAN_KEY

__all__ = ["PIECE_TOKENS_KEY", "SOURCE_ID_KEY", "SOURCE_SPAN_KEY", "MultiViewContextBuilder"]
