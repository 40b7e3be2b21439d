"""``FusionJoiner``: several retrievers' ranked lists fused into one, each list weighed by the name of its source."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from haystack_mvr.components.joiners.document_score_normalizer import rescaled_scores
from haystack_mvr.validation import check_positive_int

__all__ = ["FUSIONS", "RRF_K", "FusionJoiner"]

FUSIONS = ("convex", "rrf", "dbsf")
RRF_K = 61  # Haystack's: 60 as in Cormack et al. (2009), plus 1 for 0-based ranks
_METHODS = {"convex": "min_max", "dbsf": "dbsf"}


def checked_weights(weights: Sequence[float] | None, count: int) -> list[float]:
    """``weights`` summing to 1 (``None``: equal), or a ``ValueError`` naming what is wrong with them."""
    if weights is None:
        return [1.0 / count] * count
    values = list(weights)
    if len(values) != count:
        msg = f"weights must have one value per source ({count}), got {len(values)}: {values!r}."
        raise ValueError(msg)
    if any(isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0 for w in values):
        msg = f"weights must be finite numbers >= 0, got {values!r}."
        raise ValueError(msg)
    total = math.fsum(values)
    if total <= 0:
        msg = f"weights must not all be 0, got {values!r}."
        raise ValueError(msg)
    return [float(w) / total for w in values]


@component
class FusionJoiner:
    """
    Fuses the ranked lists of several retrievers into one: one input per source, named after it, so each list gets
    its own weight whatever order the sources run in (a ``DocumentJoiner`` weighs the lists of its one variadic input
    in the order they arrive).

    - ``convex``: each list's scores min-max rescaled to [0, 1], then the weighted sum (a document a source did not
      return gets 0 from it);
    - ``dbsf``: distribution-based score fusion, each list's mean - 3 std -> 0 and mean + 3 std -> 1, then the
      weighted sum (as Qdrant's DBSF);
    - ``rrf``: reciprocal rank fusion, the weighted sum of ``61 / (61 + rank)`` (Haystack's RRF scores).

    Weights are normalised to sum to 1. The fused documents are copies of the first source's copy of each document
    (in ``sources`` order) with the fused score, best first, at most ``top_k``.
    """

    def __init__(
        self,
        sources: list[str],
        fusion: str = "convex",
        weights: list[float] | None = None,
        top_k: int = 10,
    ) -> None:
        """
        :param sources: The inputs, one per source, in the order of ``weights`` (names without ``.``).
        :param fusion: ``"convex"``, ``"dbsf"`` or ``"rrf"``.
        :param weights: One finite, non-negative weight per source; ``None``: equal weights.
        :param top_k: How many fused documents to return.
        """
        if not isinstance(sources, (list, tuple)) or not sources:
            msg = f"sources must be a non-empty list of names, got {sources!r}."
            raise ValueError(msg)
        if any(not isinstance(s, str) or not s or "." in s for s in sources) or len(set(sources)) != len(sources):
            msg = f"sources must be distinct names without '.', got {sources!r}."
            raise ValueError(msg)
        if fusion not in FUSIONS:
            msg = f"fusion must be one of {FUSIONS}, got {fusion!r}."
            raise ValueError(msg)
        self.sources = list(sources)
        self.fusion = fusion
        self.weights = None if weights is None else [float(w) for w in weights]
        self._weights = checked_weights(weights, len(self.sources))
        self.top_k = check_positive_int("top_k", top_k)
        component.set_input_types(self, **dict.fromkeys(self.sources, list[Document]))

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, sources=self.sources, fusion=self.fusion, weights=self.weights, top_k=self.top_k)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusionJoiner:
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, **lists: list[Document]) -> dict[str, list[Document]]:
        """
        :param lists: Each source's documents, best first, under the source's name (its scores are read by
            ``convex`` and ``dbsf``, only its order by ``rrf``).
        :returns: ``{"documents": [...]}``: the fused documents, best first.
        """
        fused: dict[str, float] = {}
        first: dict[str, Document] = {}
        for source, weight in zip(self.sources, self._weights, strict=True):
            documents = lists.get(source) or []
            if self.fusion == "rrf":
                scores = [RRF_K / (RRF_K + rank) for rank in range(len(documents))]
            else:
                scores = rescaled_scores(documents, _METHODS[self.fusion])
            for doc, score in zip(documents, scores, strict=True):
                fused[doc.id] = fused.get(doc.id, 0.0) + weight * score
                first.setdefault(doc.id, doc)
        ranked = sorted(first, key=lambda i: -fused[i])[: self.top_k]  # stable: sources order among equal scores
        return {"documents": [dataclasses.replace(first[i], score=fused[i]) for i in ranked]}
