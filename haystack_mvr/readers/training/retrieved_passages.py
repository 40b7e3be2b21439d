"""
The passages a reader is trained on for each question: a retriever's top-k with the gold paragraph ensured.

Both reader trainings read the same retrieved file (one ``{"id": question id, "passages": [corpus ids, best
first]}`` per line; ``haystack-mvr train-reader --write-bm25-retrieved`` writes one from BM25). Only passages of the
training articles are ever retrieved or read, so no dev paragraph is seen in training, not even as a negative.
"""

from __future__ import annotations

import json
from pathlib import Path

from haystack_mvr.datasets import DEV_ARTICLES, Passage, Question

__all__ = ["bm25_top_passages", "passages_with_gold", "read_retrieved", "training_passages", "write_retrieved"]


def training_passages(passages: dict[str, Passage]) -> list[Passage]:
    """The corpus passages outside ``DEV_ARTICLES``: what training may retrieve."""
    dev = set(DEV_ARTICLES)
    return [p for p in passages.values() if p.title not in dev]


def bm25_top_passages(questions: list[Question], corpus: list[Passage], k: int) -> dict[str, list[str]]:
    """
    Each question's ``k`` best BM25 passages (``bm25s``, English stopwords, ``title + text``), best first.

    :returns: ``{question id: [corpus id, ...]}``.
    """
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize([f"{p.title} {p.text}" for p in corpus], stopwords="en", show_progress=False),
        show_progress=False,
    )
    tokens = bm25s.tokenize([q.question for q in questions], stopwords="en", return_ids=False, show_progress=False)
    ranked, _scores = retriever.retrieve(tokens, k=min(k, len(corpus)), show_progress=False)
    return {q.id: [corpus[int(i)].id for i in row] for q, row in zip(questions, ranked, strict=True)}


def read_retrieved(path: Path) -> dict[str, list[str]]:
    """A retrieved file: one ``{"id": question id, "passages": [corpus id, ...]}`` per line."""
    retrieved = {}
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            if not isinstance(record.get("passages"), list) or "id" not in record:
                msg = f"{path}:{n}: each line needs 'id' and a 'passages' list of corpus ids."
                raise ValueError(msg)
            retrieved[str(record["id"])] = [str(p) for p in record["passages"]]
    return retrieved


def write_retrieved(path: Path, retrieved: dict[str, list[str]]) -> None:
    """Write ``{question id: [corpus id, ...]}`` as the retrieved file ``read_retrieved`` reads."""
    with Path(path).open("w", encoding="utf-8") as f:
        for question_id, passage_ids in retrieved.items():
            f.write(json.dumps({"id": question_id, "passages": passage_ids}) + "\n")


def passages_with_gold(
    question: Question, passages: dict[str, Passage], retrieved: dict[str, list[str]] | None, k: int
) -> list[str]:
    """
    The ``k`` passage ids ``question`` is trained on: its retrieved ones (best first, dev articles and unknown ids
    dropped), the gold paragraph put in place of the last when the retriever missed it; the gold paragraph alone
    without ``retrieved`` or when it lacks the question.
    """
    dev = set(DEV_ARTICLES)
    ids = [i for i in (retrieved or {}).get(question.id, []) if i in passages and passages[i].title not in dev]
    ids = ids[:k] or [question.positive_id]
    if question.positive_id not in ids:
        ids = [*ids[: k - 1], question.positive_id] if len(ids) >= k else [*ids, question.positive_id]
    return ids
