"""Wire the fusion of several retrievers' documents into a Haystack pipeline."""

from __future__ import annotations

from collections.abc import Sequence

from haystack import Pipeline
from haystack.components.joiners import DocumentJoiner

from haystack_mvr.components.joiners.document_score_normalizer import DocumentScoreNormalizer

FUSIONS = ("convex", "rrf")


def add_fusion_joiner(
    pipeline: Pipeline,
    sources: Sequence[str],
    *,
    fusion: str = "convex",
    weights: list[float] | None = None,
    top_k: int = 10,
    name: str = "joiner",
) -> None:
    """
    Add a ``DocumentJoiner`` named ``name`` fed by the ``documents`` output of each component in ``sources``.

    ``fusion="convex"``: each source's scores pass through a min-max ``DocumentScoreNormalizer``
    (``<source>_scores``) and the joiner sums them with ``weights`` (``join_mode="merge"``).
    ``fusion="rrf"``: reciprocal rank fusion of the ranks, weighted by ``weights``.
    ``weights`` follow the order of ``sources``; ``None`` weighs them equally.
    """
    if fusion not in FUSIONS:
        msg = f"fusion must be one of {FUSIONS}, got {fusion!r}."
        raise ValueError(msg)
    mode = "merge" if fusion == "convex" else "reciprocal_rank_fusion"
    pipeline.add_component(name, DocumentJoiner(join_mode=mode, weights=weights, top_k=top_k))
    for source in sources:
        output = f"{source}.documents"
        if fusion == "convex":
            pipeline.add_component(f"{source}_scores", DocumentScoreNormalizer("min_max"))
            pipeline.connect(output, f"{source}_scores.documents")
            output = f"{source}_scores.documents"
        pipeline.connect(output, f"{name}.documents")
