"""``FusionJoiner``: several retrievers' ranked lists fused into one, each list weighed by the name of its source."""

from __future__ import annotations

import copy
import dataclasses
import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict

from haystack_mvr.components.joiners.document_score_normalizer import rescaled_scores
from haystack_mvr.validation import check_positive_int

__all__ = ["FUSIONS", "RRF_K", "FusionJoiner"]

FUSIONS = ("convex", "rrf", "dbsf")
RRF_K = 61  # Haystack's: 60 as in Cormack et al. (2009), plus 1 for 0-based ranks
_METHODS = {"convex": "min_max", "dbsf": "dbsf"}


def checked_weights(weights: Sequence[float] | None, count: int) -> list[float]:
    """``weights`` summing to 1 (``None``: equal), or a ``ValueError`` naming ``weights`` and what is wrong with them.

    A list, tuple or 1-D numpy array of real numbers (Python or numpy; not bools), finite, ``>= 0``, not all 0, one
    per source. Normalising divides by the largest weight first, so weights near float's limit (``1e308``) do not
    overflow their sum.
    """
    if weights is None:
        return [1.0 / count] * count
    values = _weight_list(weights)
    if len(values) != count:
        msg = f"weights must have one value per source ({count}), got {len(values)}: {_shown(values)}."
        raise ValueError(msg)
    if any(not math.isfinite(w) or w < 0 for w in values):
        msg = f"weights must be finite numbers >= 0, got {_shown(values)}."
        raise ValueError(msg)
    largest = max(values)
    if largest <= 0:
        msg = f"weights must not all be 0, got {_shown(values)}."
        raise ValueError(msg)
    scaled = [w / largest for w in values]
    total = math.fsum(scaled)
    return [w / total for w in scaled]


def _weight_list(weights: Any) -> list[float]:
    """``weights`` as Python floats, or a ``ValueError`` naming ``weights``."""
    if isinstance(weights, np.ndarray):
        if weights.ndim != 1:
            msg = f"weights must be a list of numbers, one per source, got a numpy array of shape {weights.shape}."
            raise ValueError(msg)
        weights = weights.tolist()
    if not isinstance(weights, (list, tuple)):
        msg = (
            f"weights must be a list of numbers, one per source in the order of sources, got "
            f"{type(weights).__name__} {_shown(weights)}."
        )
        raise ValueError(msg)
    if any(isinstance(w, (bool, np.bool_)) or not isinstance(w, numbers.Real) for w in weights):
        msg = f"weights must be finite numbers >= 0 (not bools, lists or None), got {_shown(weights)}."
        raise ValueError(msg)
    return [float(w) for w in weights]


def _shown(value: Any) -> str:
    """``repr(value)``, at most 200 characters."""
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:200]}..."


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
    (in ``sources`` order, with a copy of its ``meta``: nothing given is changed) with the fused score, best first,
    at most ``top_k``.
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
        :param weights: One finite, non-negative weight per source (a list or a 1-D numpy array; numpy numbers are
            fine); ``None``: equal weights.
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
        self._weights = checked_weights(weights, len(self.sources))
        self.weights = None if weights is None else _weight_list(weights)
        self.top_k = check_positive_int("top_k", top_k)
        for source in self.sources:  # one at a time: a source may be named "self"
            component.set_input_type(self, source, list[Document])

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, sources=self.sources, fusion=self.fusion, weights=self.weights, top_k=self.top_k)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusionJoiner:
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, /, **lists: list[Document]) -> dict[str, list[Document]]:
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
        return {
            "documents": [
                dataclasses.replace(first[i], meta=copy.deepcopy(first[i].meta), score=fused[i]) for i in ranked
            ]
        }
