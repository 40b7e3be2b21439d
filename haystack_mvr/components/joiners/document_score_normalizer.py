"""Rescale one retriever's scores per query, so lists from different retrievers can be summed."""

from __future__ import annotations

import dataclasses
import math
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
        scores = []
        for doc in documents:
            if not isinstance(doc.score, (int, float)) or not math.isfinite(doc.score):
                msg = f"Document {doc.id!r} has no finite score ({doc.score!r}); connect a retriever's output."
                raise ValueError(msg)
            scores.append(float(doc.score))
        if not scores:
            return {"documents": []}
        if self.method == "min_max":
            low, spread = min(scores), max(scores) - min(scores)
            rescaled = [(s - low) / spread if spread > 0 else 1.0 for s in scores]
        else:
            mean = sum(scores) / len(scores)
            std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
            if self.method == "dbsf":  # (s - (mean - 3 std)) / (6 std)
                rescaled = [(s - mean + 3 * std) / (6 * std) if std > 0 else 0.5 for s in scores]
            else:
                rescaled = [(s - mean) / std if std > 0 else 0.0 for s in scores]
        return {"documents": [dataclasses.replace(d, score=s) for d, s in zip(documents, rescaled, strict=True)]}
