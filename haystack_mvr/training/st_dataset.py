"""Training examples -> a ``datasets.Dataset`` for sentence-transformers' trainer: in-batch, BM25 and mined negatives.

Columns: ``query``, ``positive``, ``negative_1 .. negative_n`` (text, in that order: sentence-transformers' losses
read them by position) and, for CAMVR's answer-view loss, ``answer_view`` (the positive's answer view, ``-1``
unknown; :class:`~haystack_mvr.training.MultiViewDataCollator` hands it to the loss as the labels)::

    data = load_examples(args)                       # squad-mv / DPR / BEIR, with file, mined and BM25 pools
    dataset = build_st_dataset(data.examples, num_negatives=1, corpus=data.corpus, num_snippets=8)

With ``num_negatives=0`` the queries have in-batch negatives only (DPR's in-batch training); hard negatives come
from each example's pool (:func:`~haystack_mvr.training.negatives.bm25_negatives`, mined negatives and DPR files,
attached by :func:`~haystack_mvr.training.data.attach_negatives`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from typing import Any

from haystack_mvr.datasets.squad_mv import Passage
from haystack_mvr.modeling.snippets import Span, split_into_snippets, view_for_offset
from haystack_mvr.training.data import TrainingExample
from haystack_mvr.training.data_collator import ANSWER_VIEW
from haystack_mvr.training.negatives import is_valid_negative

logger = logging.getLogger(__name__)

__all__ = ["answer_view_of", "build_st_dataset", "negative_columns"]


def negative_columns(num_negatives: int) -> list[str]:
    """``["negative_1", ..., "negative_n"]``."""
    return [f"negative_{i}" for i in range(1, num_negatives + 1)]


def answer_view_of(text: str, answer_start: int | None, num_snippets: int, *, first_snippet_view: int = 1) -> int:
    """
    The view of the snippet holding character ``answer_start`` of ``text`` (CAMVR Algorithm 1 snippets), or ``-1``.

    :param text: The text the model encodes (title and separator included when it embeds titles).
    :param answer_start: The answer's character offset in ``text``; ``None`` when unknown.
    :param num_snippets: The model's number of snippets.
    :param first_snippet_view: The view of snippet 0: 1 in snippet mode (view 0 pools the whole text).
    """
    if answer_start is None:
        return -1
    view = view_for_offset(split_into_snippets(text, num_snippets), answer_start)
    return -1 if view is None else first_snippet_view + view


def _draw_negatives(
    example: TrainingExample,
    index: int,
    num_negatives: int,
    corpus: Sequence[Passage],
    text_of,
    seed: int,
) -> list[Passage] | None:
    rng = random.Random(f"{seed}/{index}")  # str seeds are hashed deterministically
    pool = list(example.hard_negatives)
    chosen = rng.sample(pool, min(num_negatives, len(pool)))
    taken = {p.id for p in chosen}
    for _ in range(20 * num_negatives if corpus else 0):  # fill from random corpus passages (DPR's random negatives)
        if len(chosen) == num_negatives:
            break
        candidate = corpus[rng.randrange(len(corpus))]
        if candidate.id not in taken and is_valid_negative(example, candidate, text_of):
            chosen.append(candidate)
            taken.add(candidate.id)
    return chosen if len(chosen) == num_negatives else None


def build_st_dataset(
    examples: Sequence[TrainingExample],
    *,
    num_negatives: int = 1,
    corpus: Sequence[Passage] = (),
    num_snippets: int | None = None,
    first_snippet_view: int = 1,
    embed_title: bool = False,
    title_separator: str = "\n",
    seed: int = 42,
    snippet_spans: Callable[[str], Sequence[Span | None]] | None = None,
) -> Any:
    """
    The examples as a ``datasets.Dataset`` of ``(query, positive, negative_1, ..., negative_n[, answer_view])``.

    Each example draws ``num_negatives`` from its pool of hard negatives (seeded, once); a pool that is too small is
    filled with random ``corpus`` passages that are neither a positive nor hold an answer, and an example that
    still lacks negatives is dropped (logged). Drawing once, not per epoch as the old trainer did: build the
    dataset again to redraw.

    :param examples: Training examples, hard-negative pools attached.
    :param num_negatives: Hard negatives per query (0: in-batch negatives only).
    :param corpus: Passages for random negatives where a pool runs short.
    :param num_snippets: Write the ``answer_view`` column for a model with this many snippets (``None``: no column).
    :param first_snippet_view: The model's view of snippet 0 (1 in snippet mode, after the whole-text view).
    :param embed_title: Documents are ``title + title_separator + text``, as the model will embed them.
    :param title_separator: See ``embed_title``.
    :param seed: Seed of the draws.
    :param snippet_spans: The spans of the snippets the model gives a text (snippet mode: a document's snippet
        count grows with its length, :func:`haystack_mvr.modeling.encoder_inspection.snippet_spans`); ``None``: CAMVR
        Algorithm 1's ``num_snippets`` snippets.
    :raises ImportError: without the ``datasets`` package.
    :raises ValueError: if ``num_negatives`` is negative or no example is left.
    """
    try:
        from datasets import Dataset
    except ImportError as e:
        msg = 'Training through sentence-transformers needs datasets: pip install "haystack-mvr[train]".'
        raise ImportError(msg) from e
    if num_negatives < 0:
        msg = f"num_negatives must be non-negative, got {num_negatives}."
        raise ValueError(msg)

    def text_of(p: Passage) -> str:
        return p.title + title_separator + p.text if embed_title and p.title else p.text

    columns: dict[str, list] = {"query": [], "positive": [], **{name: [] for name in negative_columns(num_negatives)}}
    if num_snippets is not None:
        columns[ANSWER_VIEW] = []
    dropped = 0
    for index, example in enumerate(examples):
        negatives = _draw_negatives(example, index, num_negatives, corpus, text_of, seed) if num_negatives else []
        if negatives is None:
            dropped += 1
            continue
        positive = text_of(example.positive)
        columns["query"].append(example.query)
        columns["positive"].append(positive)
        for name, passage in zip(negative_columns(num_negatives), negatives, strict=True):
            columns[name].append(text_of(passage))
        if num_snippets is not None:
            head = len(positive) - len(example.positive.text)
            start = None if example.answer_start is None else example.answer_start + head
            if snippet_spans is not None and start is not None:
                view = view_for_offset(snippet_spans(positive), start)
                columns[ANSWER_VIEW].append(-1 if view is None else first_snippet_view + view)
            else:
                columns[ANSWER_VIEW].append(
                    answer_view_of(positive, start, num_snippets, first_snippet_view=first_snippet_view)
                )
    if dropped:
        logger.warning("Dropped %d of %d examples with fewer than %d negatives.", dropped, len(examples), num_negatives)
    if not columns["query"]:
        msg = f"No training example has {num_negatives} negatives: lower num_negatives or give a corpus."
        raise ValueError(msg)
    return Dataset.from_dict(columns)
