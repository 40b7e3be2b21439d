"""Evaluate retrieval by running real Haystack query pipelines over a question set."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from haystack import Document, Pipeline
from tqdm.auto import tqdm

from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.datasets import Question
from haystack_mvr.evaluation.retrieval_metrics import DEFAULT_KS, compute_retrieval_metrics


@dataclass
class RankedResults:
    """Per question, the retrieved documents, best first."""

    questions: list[Question]
    documents: list[list[Document]]

    @property
    def ids(self) -> list[list[str]]:
        return [[d.id for d in docs] for docs in self.documents]

    @property
    def texts(self) -> list[list[str]]:
        return [[d.content or "" for d in docs] for docs in self.documents]


def run_query_pipeline(
    pipeline: Pipeline,
    questions: Sequence[Question],
    *,
    inputs: Callable[[str], dict[str, Any]],
    output_component: str,
    progress_bar: bool = False,
    batch_size: int = 64,
) -> RankedResults:
    """
    Run ``pipeline`` once per question and collect ``output_component``'s ``documents``.

    A pipeline that is exactly a query embedder feeding a ``MultiViewRetriever`` is run as the embedder per
    question and ``MultiViewRetriever.run_batch`` per ``batch_size`` questions (one batched store search each):
    the same rankings, several times faster.

    :param inputs: Builds the pipeline's ``run`` data from a question string,
        e.g. ``lambda q: {"query_embedder": {"text": q}}``.
    :param output_component: The component whose ``documents`` output is the ranking (e.g. the retriever).
    """
    batched = _embedder_then_multi_view_retriever(pipeline, output_component)
    if batched is not None:
        return _run_batched(pipeline, questions, inputs, batched, output_component, progress_bar, batch_size)
    ranked = []
    for q in tqdm(questions, desc="Querying", disable=not progress_bar, unit="q"):
        result = pipeline.run(inputs(q.question), include_outputs_from={output_component})
        ranked.append(list(result[output_component]["documents"]))
    return RankedResults(list(questions), ranked)


def _embedder_then_multi_view_retriever(pipeline: Pipeline, output_component: str) -> tuple[str, str] | None:
    """``(embedder, its output socket)`` when ``pipeline`` is exactly a query embedder feeding a
    ``MultiViewRetriever``'s ``query_embedding``, else ``None``."""
    if not isinstance(pipeline.get_component(output_component), MultiViewRetriever) or len(pipeline.graph) != 2:
        return None
    edges = list(pipeline.graph.in_edges(output_component, data=True))
    if len(edges) != 1 or edges[0][2]["to_socket"].name != "query_embedding":
        return None
    return edges[0][0], edges[0][2]["from_socket"].name


def _run_batched(
    pipeline: Pipeline,
    questions: Sequence[Question],
    inputs: Callable[[str], dict[str, Any]],
    embedder: tuple[str, str],
    output_component: str,
    progress_bar: bool,
    batch_size: int,
) -> RankedResults:
    """Embed each question, then rank ``batch_size`` questions per ``MultiViewRetriever.run_batch`` call."""
    name, socket = embedder
    component = pipeline.get_component(name)
    retriever = pipeline.get_component(output_component)
    pipeline.warm_up()
    ranked: list[list[Document]] = []
    for start in tqdm(range(0, len(questions), batch_size), desc="Querying", disable=not progress_bar, unit="batch"):
        chunk = questions[start : start + batch_size]
        embeddings, extra = [], {}
        for q in chunk:
            data = inputs(q.question)
            embeddings.append(component.run(**data.get(name, {}))[socket])
            extra = data.get(output_component, {})
        result = retriever.run_batch(embeddings, **extra)
        ranked.extend(list(docs) for docs in result["documents"])
    return RankedResults(list(questions), ranked)


def evaluate_ranking(results: RankedResults, ks: Sequence[int] = DEFAULT_KS) -> dict[str, float]:
    """Gold and answer top-k accuracy, MRR@10, nDCG@10 and Recall@100 (fractions) of ranked results."""
    return compute_retrieval_metrics(
        results.ids,
        [q.positive_id for q in results.questions],
        retrieved_texts=results.texts,
        answers=[q.answers for q in results.questions],
        ks=ks,
    )
