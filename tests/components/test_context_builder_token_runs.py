"""MultiViewContextBuilder on token views over text without sentence ends (a transcript, scraped text): the page is
one "sentence", so its token views seed runs of words, and the piece holds the tokens the query matched."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from haystack import Document

from haystack_mvr.components.builders import MultiViewContextBuilder
from haystack_mvr.components.builders.multi_view_context_builder import (
    LONG_SENTENCE_VIEWS,
    TOKEN_RUN_VIEWS,
    token_seed_spans,
)
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.views import PackedViews

WORDS = 300


def transcript(words: list[str]) -> tuple[str, list[list[int]]]:
    """The words joined by spaces, no sentence end anywhere, and one token view span per word."""
    text = " ".join(words)
    spans, start = [], 0
    for word in words:
        start = text.index(word, start)
        spans.append([start, start + len(word)])
        start += len(word)
    return text, spans


def transcript_store() -> tuple[FaissMultiViewDocumentStore, str, np.ndarray]:
    """One page of ``WORDS`` words without a sentence end, a token view per word (an identity matrix), and a query
    whose three vectors match words 200-202."""
    text, spans = transcript([f"w{i}" for i in range(WORDS)])
    views = np.eye(WORDS, dtype=np.float32)
    store = FaissMultiViewDocumentStore(embedding_dim=WORDS)
    store.write_documents(
        [Document(id="page", content=text, meta={"mvr_views": views.tolist(), "mvr_view_spans": spans})]
    )
    query = np.zeros((3, WORDS), dtype=np.float32)
    query[0, 200], query[1, 201], query[2, 202] = 1.0, 0.9, 0.8
    return store, text, query


@pytest.mark.parametrize("budget", [3, 5, 20, 64])
def test_the_piece_holds_the_matched_tokens_not_the_pages_first_words(budget):
    store, text, query = transcript_store()
    (found,) = store.search(query, top_k=1)
    builder = MultiViewContextBuilder(document_store=store, budget_tokens=budget, piece_tokens=min(budget, 20))
    pieces = builder.run(documents=[found], packed_query_embedding=PackedViews(query))["documents"]
    assert pieces
    best = max(pieces, key=lambda p: p.score)
    start, end = best.meta["mvr_source_span"]
    matched_start, matched_end = best.meta["mvr_matched_span"]
    assert start <= matched_start < matched_end <= end  # the matched token lies inside its piece
    assert best.meta["mvr_matched_text"] in best.content
    assert best.meta["mvr_matched_text"] in {"w200", "w201", "w202"}
    assert not best.content.startswith("w0 ")
    assert sum(len(p.content.split()) for p in pieces) <= budget
    if budget >= 20:
        assert "w200 w201 w202" in best.content
        assert all(text.startswith(p.content, p.meta["mvr_source_span"][0]) for p in pieces)


def test_token_views_of_a_page_long_sentence_seed_runs_of_words_not_the_page():
    text, spans = transcript([f"w{i}" for i in range(WORDS)])
    scores = [float(i % 7) for i in range(WORDS)]
    seeds = token_seed_spans([(0, len(text))], [tuple(s) for s in spans], scores)
    taken = [s for s in seeds if s is not None]
    assert len(taken) >= WORDS // (2 * TOKEN_RUN_VIEWS)  # many seeds, not one for the whole page
    assert all(len(text[a:b].split()) <= 2 * TOKEN_RUN_VIEWS for a, b in taken)
    assert sorted(taken) == taken and all(a1 < b0 for (_, a1), (b0, _) in itertools.pairwise(taken))
    assert all(text[a] != " " and text[b - 1] != " " for a, b in taken)  # whole words
    for view, seed in enumerate(seeds):  # each seed is its run's best-scoring token, and holds it
        if seed is not None:
            assert seed[0] <= spans[view][0] and spans[view][1] <= seed[1]


def test_word_pieces_of_one_word_stay_in_one_run():
    """A run ends only between words: sub-word token views (no gap between their spans) are never split apart."""
    words = [f"w{i}" for i in range(LONG_SENTENCE_VIEWS + 40)]
    text = " ".join(words)
    spans, start = [], 0
    for word in words:  # each word as two word pieces: "w1" -> "w", "1"
        start = text.index(word, start)
        spans += [(start, start + 1), (start + 1, start + len(word))]
        start += len(word)
    seeds = token_seed_spans([(0, len(text))], spans, [0.0] * len(spans))
    for a, b in (s for s in seeds if s is not None):
        assert (a == 0 or text[a - 1] == " ") and (b == len(text) or text[b] == " ")


def test_sentences_of_ordinary_length_are_still_seeded_whole():
    sentences = [" ".join(f"s{k}w{i}" for i in range(20)) + "." for k in range(3)]
    text = " ".join(sentences)
    spans, start = [], 0
    for word in text.split():
        start = text.index(word, start)
        spans.append((start, start + len(word)))
        start += len(word)
    bounds, start = [], 0
    for sentence in sentences:
        bounds.append((start, start + len(sentence)))
        start += len(sentence) + 1
    seeds = token_seed_spans(bounds, spans, [1.0] * len(spans))
    assert [s for s in seeds if s is not None] == bounds


def test_token_view_pieces_on_random_pages_stay_in_budget_and_hold_their_matched_token():
    import random

    rng = random.Random(7)
    for _ in range(40):
        n = rng.randint(20, 400)
        words = [f"w{i}" + ("." if rng.random() < rng.choice([0.0, 0.02, 0.2]) else "") for i in range(n)]
        text, spans = transcript(words)
        views = np.eye(n, dtype=np.float32)
        store = FaissMultiViewDocumentStore(embedding_dim=n)
        meta = {"mvr_views": views.tolist(), "mvr_view_spans": spans}
        store.write_documents([Document(id="page", content=text, meta=meta)])
        query = np.zeros((3, n), dtype=np.float32)
        for row in range(3):
            query[row, rng.randrange(n)] = rng.uniform(0.2, 1.0)
        budget = rng.randint(1, 80)
        builder = MultiViewContextBuilder(document_store=store, budget_tokens=budget, piece_tokens=rng.randint(1, 40))
        (found,) = store.search(query, top_k=1)
        pieces = builder.run(documents=[found], packed_query_embedding=PackedViews(query))["documents"]
        assert pieces and sum(p.meta["mvr_piece_tokens"] for p in pieces) <= budget
        for piece in pieces:
            start, end = piece.meta["mvr_source_span"]
            assert text[start:end] == piece.content
            matched_start, matched_end = piece.meta["mvr_matched_span"]
            assert start <= matched_start < matched_end <= end
