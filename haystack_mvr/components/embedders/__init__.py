from haystack_mvr.components.embedders.multi_view_document_embedder import MultiViewDocumentEmbedder
from haystack_mvr.components.embedders.multi_view_text_embedder import MultiViewTextEmbedder

__all__ = ["MultiViewDocumentEmbedder", "MultiViewTextEmbedder"]
