"""Rescale one retriever's scores per query, so lists from different retrievers can be summed."""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, Literal

from haystack import Document, component, default_from_dict, default_to_dict

METHODS = ("min_max", "z_score", "dbsf")


@component
class DocumentScoreNormalizer:
    """
    Rescales the scores of one ranked list: ``min_max`` maps them to [0, 1], ``z_score`` to mean 0, std 1, ``dbsf``
    maps mean - 3 std to 0 and mean + 3 std to 1 (distribution-based score fusion's normalisation, as Haystack's
    ``DocumentJoiner(join_mode="distribution_based_rank_fusion")`` and Qdrant's DBSF compute it; not clipped).

    Put one after each retriever and sum the lists with ``DocumentJoiner(join_mode="merge", weights=[...])``:
    a convex combination of normalised scores (BM25 + multi-view, say). Unlike reciprocal rank fusion it keeps
    how far apart the scores are, so a retriever that is sure of its first document can carry the fused rank.
    Order and every other field are kept; a list whose scores are all equal gets 1.0 (``min_max``), 0.0
    (``z_score``) or 0.5 (``dbsf``, the middle of its range).
    """

    def __init__(self, method: Literal["min_max", "z_score", "dbsf"] = "min_max") -> None:
        if method not in METHODS:
            msg = f"method must be one of {METHODS}, got {method!r}."
            raise ValueError(msg)
        self.method = method

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, method=self.method)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DocumentScoreNormalizer:
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        :param documents: One retriever's documents, each with a ``score``.
        :returns: ``{"documents": [...]}``, copies with rescaled scores, in the input order.
        """
        if not isinstance(documents, list) or any(not isinstance(d, Document) for d in documents):
            msg = "DocumentScoreNormalizer expects a list of Documents."
            raise ValueError(msg)
        rescaled = rescaled_scores(documents, self.method)
        return {"documents": [dataclasses.replace(d, score=s) for d, s in zip(documents, rescaled, strict=True)]}


def rescaled_scores(documents: list[Document], method: str) -> list[float]:
    """
    The documents' scores rescaled by ``method`` (see :class:`DocumentScoreNormalizer`). Scores may be any real
    numbers (numpy's too); extreme ones (beyond 1e150 or below 1e-150 in magnitude) are first divided by the largest
    magnitude, which none of the three methods' results depends on, so that no spread or square overflows.

    :raises ValueError: for a document without a finite score, naming it.
    """
    scores = []
    for doc in documents:
        score = doc.score
        if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
            msg = f"Document {doc.id!r} has no finite score ({score!r}); connect a retriever's output."
            raise ValueError(msg)
        scores.append(float(score))
    if not scores:
        return []
    largest = max(abs(s) for s in scores)
    if largest > 1e150 or 0 < largest < 1e-150:  # squares and spreads would overflow or vanish: rescale first
        scores = [s / largest for s in scores]
    if method == "min_max":
        low, spread = min(scores), max(scores) - min(scores)
        return [(s - low) / spread if spread > 0 else 1.0 for s in scores]
    mean = math.fsum(scores) / len(scores)
    std = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / len(scores))
    if method == "dbsf":  # (s - (mean - 3 std)) / (6 std)
        return [(s - mean + 3 * std) / (6 * std) if std > 0 else 0.5 for s in scores]
    return [(s - mean) / std if std > 0 else 0.0 for s in scores]
