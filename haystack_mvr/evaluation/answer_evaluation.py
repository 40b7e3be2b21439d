"""
End-to-end answer evaluation: a Haystack reader over each question's retrieved documents, scored by EM and F1.

The reader is any component with ``run(query=..., documents=...) -> {"answers": [...]}`` whose answers carry
``data`` (Haystack's ``TransformersExtractiveReader``, ``FusionInDecoderReader``, ...). The context mode decides what
the reader reads: ``"document"`` the whole documents, ``"matched_view"`` each document's matched snippet
(``meta["mvr_matched_text"]``, set by the multi-view retriever; documents without one are read whole).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from haystack import Document

from haystack_mvr.datasets import Question
from haystack_mvr.evaluation.answer_matching import has_answer
from haystack_mvr.evaluation.answer_metrics import summarize_answers
from haystack_mvr.views import MATCHED_TEXT_KEY

__all__ = ["CONTEXTS", "AnswerRun", "context_documents", "read_answers"]

CONTEXTS = ("document", "matched_view")


def context_documents(documents: Sequence[Document], context: str) -> list[Document]:
    """
    What a reader reads in ``context`` mode: the documents themselves, or copies whose content is the matched view.

    Inputs are never mutated. A document without a matched snippet is kept whole in either mode.
    """
    if context not in CONTEXTS:
        msg = f"context must be one of {list(CONTEXTS)}, got {context!r}."
        raise ValueError(msg)
    if context == "document":
        return list(documents)
    out = []
    for doc in documents:
        snippet = doc.meta.get(MATCHED_TEXT_KEY)
        out.append(replace(doc, content=snippet) if isinstance(snippet, str) and snippet.strip() else doc)
    return out


@dataclass
class AnswerRun:
    """One reader over one question set: the top answer per question and what it cost."""

    questions: list[Question]
    predictions: list[str | None]
    context_tokens: list[int]
    context_has_answer: list[bool]
    reader_seconds: float

    def metrics(self) -> dict[str, float]:
        """``answer_EM``, ``answer_F1`` (fractions), ``context_has_answer`` (fraction), ``context_tokens`` and
        ``reader_ms`` (means per question)."""
        n = max(len(self.questions), 1)
        result = summarize_answers(self.predictions, [q.answers for q in self.questions])
        result["context_has_answer"] = sum(self.context_has_answer) / n
        result["context_tokens"] = sum(self.context_tokens) / n
        result["reader_ms"] = 1000 * self.reader_seconds / n
        return result


def read_answers(
    reader: Any,
    questions: Sequence[Question],
    documents: Sequence[Sequence[Document]],
    *,
    context: str = "document",
    top_k: int = 3,
    count_tokens: Callable[[str], int] | None = None,
) -> AnswerRun:
    """
    Run ``reader`` once per question on its first ``top_k`` documents, read in ``context`` mode.

    :param documents: Per question, the retrieved documents, best first.
    :param count_tokens: Counts a passage's tokens for ``context_tokens`` (default: whitespace words).
    :returns: An ``AnswerRun``; ``metrics()`` gives EM / F1 with the SQuAD / DPR normalisation.
    """
    if len(questions) != len(documents):
        msg = f"{len(questions)} questions but {len(documents)} document lists."
        raise ValueError(msg)
    count = count_tokens or (lambda text: len(text.split()))
    predictions: list[str | None] = []
    tokens, found = [], []
    seconds = 0.0
    for question, docs in zip(questions, documents, strict=True):
        passages = context_documents(docs[:top_k], context)
        texts = [d.content or "" for d in passages]
        tokens.append(sum(count(t) for t in texts))
        found.append(any(has_answer(question.answers, t) for t in texts))
        start = time.perf_counter()
        answers = reader.run(query=question.question, documents=passages)["answers"] if passages else []
        seconds += time.perf_counter() - start
        top = next((a.data for a in answers if a.data), None)
        predictions.append(top)
    return AnswerRun(list(questions), predictions, tokens, found, seconds)
