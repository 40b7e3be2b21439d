from haystack_mvr.components.retrievers.multi_view_retriever import MultiViewRetriever
from haystack_mvr.components.retrievers.multi_view_text_retriever import MultiViewTextRetriever

__all__ = ["MultiViewRetriever", "MultiViewTextRetriever"]
