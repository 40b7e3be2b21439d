"""Wire the fusion of several retrievers' documents into a Haystack pipeline."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from haystack import Pipeline

from haystack_mvr.components.joiners.fusion_joiner import FusionJoiner

__all__ = ["CANDIDATES", "add_fusion_joiner"]

CANDIDATES = 100
"""Candidates per retriever that won on squad-mv (``benchmarks/results/hybrid_readme.md``): give each source this
``top_k``, far more than the joiner keeps."""

logger = logging.getLogger(__name__)


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
    Add a :class:`FusionJoiner` named ``name`` fed by the ``documents`` output of each component in ``sources``, each
    into the joiner's input of the same name, so ``weights[i]`` is ``sources[i]``'s weight whatever order the
    sources run in.

    ``fusion="convex"``: each source's scores min-max rescaled, then summed with ``weights``.
    ``fusion="rrf"``: reciprocal rank fusion of the ranks, weighted by ``weights``.
    ``fusion="dbsf"``: distribution-based score fusion: each source's mean - 3 std -> 0, mean + 3 std -> 1 (the
    rescaling of Haystack's ``DocumentJoiner(join_mode="distribution_based_rank_fusion")`` and of Qdrant's DBSF),
    then summed with ``weights``, as Qdrant's DBSF sums them (Haystack's own mode keeps each document's highest
    rescaled score and ignores weights). ``None`` weighs the sources equally. Several joiners (other weights, other
    ``name``) can read the same sources.

    Two numbers, set apart: each source retriever's own ``top_k`` is how many **candidates** it offers the fusion
    (:data:`CANDIDATES`, 100, on squad-mv), and this ``top_k`` is how many fused documents the joiner keeps (what a
    reader reads). The candidates decide the quality: a document that only one retriever found still gets a
    normalised score from it, and min-max over a short list squeezes the scores apart. On the squad-mv dev split
    (BM25 + snippet multi-view, convex 0.4 / 0.6, joiner ``top_k=5``), 5 candidates per retriever score below BM25
    alone at R@1 and 100 candidates above it (``benchmarks/results/hybrid_readme.md``). A source whose ``top_k`` is
    below :data:`CANDIDATES` and no larger than the joiner's is logged as a warning. Example::

        rag.add_component("bm25", InMemoryBM25Retriever(document_store=bm25_store, top_k=100))
        rag.add_component("dense", MultiViewRetriever(document_store=store, top_k=100))
        add_fusion_joiner(rag, ["bm25", "dense"], fusion="convex", weights=[0.4, 0.6], top_k=5)

    :param pipeline: The pipeline holding the ``sources``.
    :param sources: Names of components with a ``documents`` output (retrievers), in the order of ``weights``.
    :param fusion: ``"convex"``, ``"rrf"`` or ``"dbsf"``.
    :param weights: One finite, non-negative weight per source; ``None``: equal weights.
    :param top_k: How many fused documents the joiner returns.
    :param name: The joiner's component name.
    :raises ValueError: for an unknown ``fusion``, weights that are not one finite non-negative number per source, or
        a source the pipeline does not have.
    """
    joiner = FusionJoiner(sources=list(sources), fusion=fusion, weights=weights, top_k=top_k)  # checks them all
    for source in sources:
        offered = getattr(pipeline.get_component(source), "top_k", None)
        if isinstance(offered, int) and not isinstance(offered, bool) and offered <= top_k and offered < CANDIDATES:
            logger.warning(
                "add_fusion_joiner: %r offers top_k=%d candidates, no more than the joiner keeps (top_k=%d); fusion "
                "gains from many more candidates per retriever than documents kept (e.g. top_k=%d on each retriever).",
                source,
                offered,
                top_k,
                CANDIDATES,
            )
    pipeline.add_component(name, joiner)
    for source in sources:
        pipeline.connect(f"{source}.documents", f"{name}.{source}")
