from haystack_mvr.components.joiners.document_score_normalizer import DocumentScoreNormalizer
from haystack_mvr.components.joiners.fusion_joiner import FusionJoiner
from haystack_mvr.components.joiners.hybrid_fusion import add_fusion_joiner

__all__ = ["DocumentScoreNormalizer", "FusionJoiner", "add_fusion_joiner"]
