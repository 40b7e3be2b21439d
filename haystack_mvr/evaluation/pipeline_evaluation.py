"""Evaluate retrieval by running real Haystack query pipelines over a question set."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from haystack import Document, Pipeline
from tqdm.auto import tqdm

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
) -> RankedResults:
    """
    Run ``pipeline`` once per question and collect ``output_component``'s ``documents``.

    :param inputs: Builds the pipeline's ``run`` data from a question string,
        e.g. ``lambda q: {"query_embedder": {"text": q}}``.
    :param output_component: The component whose ``documents`` output is the ranking (e.g. the retriever).
    """
    ranked = []
    for q in tqdm(questions, desc="Querying", disable=not progress_bar, unit="q"):
        result = pipeline.run(inputs(q.question), include_outputs_from={output_component})
        ranked.append(list(result[output_component]["documents"]))
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
