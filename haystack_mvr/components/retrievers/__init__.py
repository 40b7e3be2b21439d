from haystack_mvr.components.retrievers.multi_view_retriever import MultiViewRetriever

__all__ = ["MultiViewRetriever"]
