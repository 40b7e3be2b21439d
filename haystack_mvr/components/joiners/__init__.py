from haystack_mvr.components.joiners.document_score_normalizer import DocumentScoreNormalizer
from haystack_mvr.components.joiners.hybrid_fusion import add_fusion_joiner

__all__ = ["DocumentScoreNormalizer", "add_fusion_joiner"]
