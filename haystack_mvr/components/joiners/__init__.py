from haystack_mvr.components.joiners.document_score_normalizer import DocumentScoreNormalizer

__all__ = ["DocumentScoreNormalizer"]
