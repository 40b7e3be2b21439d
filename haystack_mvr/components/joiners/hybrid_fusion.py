"""Wire the fusion of several retrievers' documents into a Haystack pipeline."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from haystack import Pipeline
from haystack.components.joiners import DocumentJoiner

from haystack_mvr.components.joiners.document_score_normalizer import DocumentScoreNormalizer

FUSIONS = ("convex", "rrf", "dbsf")
# the normalizer each score fusion puts after a source, and the suffix of its component name
NORMALIZERS = {"convex": ("min_max", "scores"), "dbsf": ("dbsf", "dbsf")}
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
    Add a ``DocumentJoiner`` named ``name`` fed by the ``documents`` output of each component in ``sources``.

    ``fusion="convex"``: each source's scores pass through a min-max ``DocumentScoreNormalizer``
    (``<source>_scores``) and the joiner sums them with ``weights`` (``join_mode="merge"``).
    ``fusion="rrf"``: reciprocal rank fusion of the ranks, weighted by ``weights``.
    ``fusion="dbsf"``: distribution-based score fusion: each source's scores pass through a
    ``DocumentScoreNormalizer("dbsf")`` (``<source>_dbsf``: mean - 3 std -> 0, mean + 3 std -> 1, the rescaling of
    Haystack's ``DocumentJoiner(join_mode="distribution_based_rank_fusion")`` and of Qdrant's DBSF) and the joiner
    sums them with ``weights`` (``join_mode="merge"``), as Qdrant's DBSF sums them. Haystack's own mode is not
    used: it keeps each document's highest rescaled score instead of the sum and ignores ``weights``.
    ``weights`` follow the order of ``sources``; ``None`` weighs them equally.

    A normalizer already in the pipeline under its name (``<source>_scores`` or ``<source>_dbsf``, from an earlier
    call over the same sources) is reused, so several joiners (other weights, other ``name``) can share the sources;
    another component under that name is refused.

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
    :param weights: One weight per source; ``None``: equal weights.
    :param top_k: How many fused documents the joiner returns.
    :param name: The joiner's component name.
    :raises ValueError: if ``fusion`` is not one of :data:`FUSIONS`, or a normalizer's name is taken by another
        component.
    """
    if fusion not in FUSIONS:
        msg = f"fusion must be one of {FUSIONS}, got {fusion!r}."
        raise ValueError(msg)
    method, suffix = NORMALIZERS.get(fusion, (None, None))
    normalizers = {source: f"{source}_{suffix}" for source in sources} if method else {}
    existing = set(pipeline.graph.nodes)
    for normalizer in normalizers.values():
        if normalizer in existing:
            present = pipeline.get_component(normalizer)
            if not isinstance(present, DocumentScoreNormalizer) or present.method != method:
                msg = (
                    f"add_fusion_joiner needs the component name {normalizer!r} for a DocumentScoreNormalizer"
                    f"({method!r}), but the pipeline has another component under it ({type(present).__name__})."
                )
                raise ValueError(msg)
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
    mode = "reciprocal_rank_fusion" if fusion == "rrf" else "merge"
    pipeline.add_component(name, DocumentJoiner(join_mode=mode, weights=weights, top_k=top_k))
    for source in sources:
        output = f"{source}.documents"
        if method:
            normalizer = normalizers[source]
            if normalizer not in existing:
                pipeline.add_component(normalizer, DocumentScoreNormalizer(method))
                pipeline.connect(output, f"{normalizer}.documents")
            output = f"{normalizer}.documents"
        pipeline.connect(output, f"{name}.documents")
