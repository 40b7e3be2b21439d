"""The late-interaction context benchmark's own logic, and the builder's pieces on token views (whole sentences)."""

from __future__ import annotations

import numpy as np
from haystack import Document

from benchmarks.late_interaction_context import sample, sentence_aligned
from haystack_mvr.components.builders import MultiViewContextBuilder
from haystack_mvr.components.builders.multi_view_context_builder import token_match_scores
from haystack_mvr.document_stores import FaissMultiViewDocumentStore
from haystack_mvr.views import PackedViews


def test_sample_is_rag_contexts_seeded_draw_and_nests():
    assert sample(5, None) == sample(5, 9) == [0, 1, 2, 3, 4]
    drawn = sample(100, 10)
    assert drawn == sorted(drawn) and len(set(drawn)) == 10 and drawn == sample(100, 10)
    assert set(drawn) <= set(sample(100, 40))  # a smaller sample is part of a larger one


def test_sentence_aligned_counts_pieces_on_both_boundaries():
    bounds = {"a": ({0, 10}, {9, 20})}
    assert sentence_aligned([["a", 0, 9], ["a", 10, 20], ["a", 3, 20], ["a", 0, 15]], bounds) == (2, 4)


def token_view_page() -> tuple[FaissMultiViewDocumentStore, list[str], np.ndarray]:
    """Six sentences of four words, one token view per word; the query's vectors match words 9-11 (the third)."""
    words = [f"w{i}" for i in range(24)]
    sentences = [" ".join(words[4 * s : 4 * s + 4]) + "." for s in range(6)]
    text = " ".join(sentences)
    spans, start = [], 0
    for word in words:
        start = text.index(word, start)
        spans.append([start, start + len(word)])
        start += len(word)
    store = FaissMultiViewDocumentStore(embedding_dim=24)
    views = np.eye(24, dtype=np.float32)
    store.write_documents(
        [Document(id="page", content=text, meta={"mvr_views": views.tolist(), "mvr_view_spans": spans})]
    )
    query = np.zeros((3, 24), dtype=np.float32)
    query[0, 9], query[1, 10], query[2, 11] = 1.0, 0.9, 0.8
    return store, sentences, query


def test_token_view_pieces_are_whole_sentences_around_the_match():
    store, sentences, query = token_view_page()
    (found,) = store.search(query, top_k=1)
    builder = MultiViewContextBuilder(document_store=store, budget_tokens=10, piece_tokens=5)
    pieces = builder.run(documents=[found], packed_query_embedding=PackedViews(query))["documents"]
    texts = [p.content for p in pieces]
    assert sentences[2] in " ".join(texts)
    assert all(t.startswith("w") and t.endswith(".") for t in texts)  # no piece starts or ends inside a sentence
    assert pieces[0].meta["mvr_matched_text"] == "w10"  # the token that scored best in the piece


def test_token_match_scores_are_a_mean_over_the_query_vectors():
    views = np.eye(8, dtype=np.float32)
    query = np.zeros((4, 8), dtype=np.float32)
    query[:, 3] = 1.0  # every query vector matches view 3 fully
    scores = token_match_scores(views, query, window=0)
    assert scores[3] == 1.0 and scores.sum() == 1.0
